#ifndef CALLEND_CV4L2_SHIM_H
#define CALLEND_CV4L2_SHIM_H
#include <libv4l2.h>
#include <linux/videodev2.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

/* v4l2_open is variadic (like open(2)); this fixes its mode argument. */
static inline int cv4l2_open(const char *path, int flags) { return v4l2_open(path, flags); }

/* VIDIOC_* request numbers are macros built from _IOWR(); Swift cannot evaluate them, so each
   request we use gets a typed wrapper. */
static inline int cv4l2_querycap(int fd, struct v4l2_capability *cap) {
    return v4l2_ioctl(fd, VIDIOC_QUERYCAP, cap);
}
static inline int cv4l2_enum_fmt(int fd, struct v4l2_fmtdesc *desc) {
    return v4l2_ioctl(fd, VIDIOC_ENUM_FMT, desc);
}
static inline int cv4l2_enum_framesizes(int fd, struct v4l2_frmsizeenum *size) {
    return v4l2_ioctl(fd, VIDIOC_ENUM_FRAMESIZES, size);
}
static inline int cv4l2_enum_frameintervals(int fd, struct v4l2_frmivalenum *interval) {
    return v4l2_ioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, interval);
}

/* The frame size and interval enumerations keep their answers in unions. */
static inline struct v4l2_frmsize_discrete cv4l2_frmsize_discrete(const struct v4l2_frmsizeenum *s) { return s->discrete; }
static inline struct v4l2_frmsize_stepwise cv4l2_frmsize_stepwise(const struct v4l2_frmsizeenum *s) { return s->stepwise; }
static inline struct v4l2_fract cv4l2_frmival_discrete(const struct v4l2_frmivalenum *i) { return i->discrete; }
static inline struct v4l2_frmival_stepwise cv4l2_frmival_stepwise(const struct v4l2_frmivalenum *i) { return i->stepwise; }

/* Streaming I/O (memory-mapped buffers). The structures keep their answers in unions, so the
   wrappers fill and read them here. All return 0 or -1 with errno set, like ioctl. */
static inline int cv4l2_set_format(int fd, unsigned int width, unsigned int height, unsigned int fourcc,
                                   unsigned int *out_width, unsigned int *out_height, unsigned int *out_fourcc,
                                   unsigned int *bytes_per_line, unsigned int *size_image) {
    struct v4l2_format f;
    memset(&f, 0, sizeof f);
    f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    f.fmt.pix.width = width;
    f.fmt.pix.height = height;
    f.fmt.pix.pixelformat = fourcc;
    f.fmt.pix.field = V4L2_FIELD_NONE;
    if (v4l2_ioctl(fd, VIDIOC_S_FMT, &f) < 0) return -1;
    *out_width = f.fmt.pix.width;
    *out_height = f.fmt.pix.height;
    *out_fourcc = f.fmt.pix.pixelformat;
    *bytes_per_line = f.fmt.pix.bytesperline;
    *size_image = f.fmt.pix.sizeimage;
    return 0;
}
/* Sets the frame interval num/den seconds; reports what the driver chose. */
static inline int cv4l2_set_frame_interval(int fd, unsigned int num, unsigned int den, unsigned int *out_num, unsigned int *out_den) {
    struct v4l2_streamparm p;
    memset(&p, 0, sizeof p);
    p.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    p.parm.capture.timeperframe.numerator = num;
    p.parm.capture.timeperframe.denominator = den;
    if (v4l2_ioctl(fd, VIDIOC_S_PARM, &p) < 0) return -1;
    *out_num = p.parm.capture.timeperframe.numerator;
    *out_den = p.parm.capture.timeperframe.denominator;
    return 0;
}
/* `call`: libv4l2's v4l2_ioctl for a camera, plain ioctl for a memory-to-memory codec. */
typedef int (*cv4l2_ioctl_function)(int, unsigned long int, ...);
static inline int cv4l2_request_buffers_with(cv4l2_ioctl_function call, int fd, unsigned int type, unsigned int count, unsigned int *granted) {
    struct v4l2_requestbuffers r;
    memset(&r, 0, sizeof r);
    r.count = count;
    r.type = type;
    r.memory = V4L2_MEMORY_MMAP;
    if (call(fd, VIDIOC_REQBUFS, &r) < 0) return -1;
    *granted = r.count;
    return 0;
}
static inline int cv4l2_stream_with(cv4l2_ioctl_function call, int fd, unsigned int type, int on) {
    int t = (int)type;
    return call(fd, on ? VIDIOC_STREAMON : VIDIOC_STREAMOFF, &t);
}
static inline int cv4l2_request_buffers(int fd, unsigned int count, unsigned int *granted) {
    return cv4l2_request_buffers_with(v4l2_ioctl, fd, V4L2_BUF_TYPE_VIDEO_CAPTURE, count, granted);
}
static inline int cv4l2_query_buffer(int fd, unsigned int index, unsigned int *offset, unsigned int *length) {
    struct v4l2_buffer b;
    memset(&b, 0, sizeof b);
    b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    b.memory = V4L2_MEMORY_MMAP;
    b.index = index;
    if (v4l2_ioctl(fd, VIDIOC_QUERYBUF, &b) < 0) return -1;
    *offset = b.m.offset;
    *length = b.length;
    return 0;
}
static inline int cv4l2_queue_buffer(int fd, unsigned int index) {
    struct v4l2_buffer b;
    memset(&b, 0, sizeof b);
    b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    b.memory = V4L2_MEMORY_MMAP;
    b.index = index;
    return v4l2_ioctl(fd, VIDIOC_QBUF, &b);
}
static inline int cv4l2_dequeue_buffer(int fd, unsigned int *index, unsigned int *bytes_used, long *seconds, long *microseconds,
                                       unsigned int *sequence, unsigned int *flags) {
    struct v4l2_buffer b;
    memset(&b, 0, sizeof b);
    b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    b.memory = V4L2_MEMORY_MMAP;
    if (v4l2_ioctl(fd, VIDIOC_DQBUF, &b) < 0) return -1;
    *index = b.index;
    *bytes_used = b.bytesused;
    *seconds = b.timestamp.tv_sec;
    *microseconds = b.timestamp.tv_usec;
    *sequence = b.sequence;
    *flags = b.flags;
    return 0;
}
static inline int cv4l2_stream(int fd, int on) { return cv4l2_stream_with(v4l2_ioctl, fd, V4L2_BUF_TYPE_VIDEO_CAPTURE, on); }
static inline void *cv4l2_mmap(int fd, unsigned int length, unsigned int offset) {
    return v4l2_mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
}
/* Finds a control by its name (VIDIOC_QUERYCTRL with V4L2_CTRL_FLAG_NEXT_CTRL); returns its id or 0. */
static inline unsigned int cv4l2_find_control(int fd, const char *name) {
    struct v4l2_queryctrl q;
    memset(&q, 0, sizeof q);
    q.id = V4L2_CTRL_FLAG_NEXT_CTRL;
    while (v4l2_ioctl(fd, VIDIOC_QUERYCTRL, &q) == 0) {
        if (strcasecmp((const char *)q.name, name) == 0) return q.id;
        q.id |= V4L2_CTRL_FLAG_NEXT_CTRL;
    }
    return 0;
}
static inline int cv4l2_set_control(int fd, unsigned int id, int value) {
    struct v4l2_control c;
    c.id = id;
    c.value = value;
    return v4l2_ioctl(fd, VIDIOC_S_CTRL, &c);
}

/* The next control after `after` (0: the first), skipping disabled ones; returns 0 when there is none.
   `name` receives the control's name (32 bytes), `type` its V4L2_CTRL_TYPE_*, min/max/def its range. */
static inline unsigned int cv4l2_next_control(int fd, unsigned int after, char *name, unsigned int *type, int *min, int *max, int *def) {
    struct v4l2_queryctrl q;
    memset(&q, 0, sizeof q);
    q.id = after | V4L2_CTRL_FLAG_NEXT_CTRL;
    while (v4l2_ioctl(fd, VIDIOC_QUERYCTRL, &q) == 0) {
        if (!(q.flags & V4L2_CTRL_FLAG_DISABLED) && q.type != V4L2_CTRL_TYPE_CTRL_CLASS) {
            memcpy(name, q.name, sizeof q.name);
            *type = q.type; *min = q.minimum; *max = q.maximum; *def = q.default_value;
            return q.id;
        }
        q.id |= V4L2_CTRL_FLAG_NEXT_CTRL;
    }
    return 0;
}
/* Sets one control through VIDIOC_S_EXT_CTRLS (codec-class controls such as the bitrate need it on some drivers). */
static inline int cv4l2_set_ext_control_with(cv4l2_ioctl_function call, int fd, unsigned int id, int value) {
    struct v4l2_ext_control c;
    struct v4l2_ext_controls cs;
    memset(&c, 0, sizeof c);
    memset(&cs, 0, sizeof cs);
    c.id = id;
    c.value = value;
    cs.which = V4L2_CTRL_ID2WHICH(id);
    cs.count = 1;
    cs.controls = &c;
    return call(fd, VIDIOC_S_EXT_CTRLS, &cs);
}
static inline int cv4l2_set_ext_control(int fd, unsigned int id, int value) { return cv4l2_set_ext_control_with(v4l2_ioctl, fd, id, value); }
static inline unsigned int cv4l2_cid_video_bitrate(void) { return V4L2_CID_MPEG_VIDEO_BITRATE; }
static inline unsigned int cv4l2_cid_force_key_frame(void) { return V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME; }
static inline unsigned int cv4l2_cid_h264_i_period(void) { return V4L2_CID_MPEG_VIDEO_H264_I_PERIOD; }
static inline unsigned int cv4l2_pix_fmt_h264(void) { return V4L2_PIX_FMT_H264; }

/* Sets the format an output device (v4l2loopback's writer side) takes: what its readers capture. Plain ioctl, not libv4l2's. */
static inline int cv4l2_set_output_format(int fd, unsigned int width, unsigned int height, unsigned int fourcc, unsigned int size) {
    struct v4l2_format f;
    memset(&f, 0, sizeof f);
    f.type = V4L2_BUF_TYPE_VIDEO_OUTPUT;
    f.fmt.pix.width = width;
    f.fmt.pix.height = height;
    f.fmt.pix.pixelformat = fourcc;
    f.fmt.pix.field = V4L2_FIELD_NONE;
    f.fmt.pix.sizeimage = size;
    return v4l2_ioctl(fd, VIDIOC_S_FMT, &f);
}
static inline unsigned int cv4l2_timestamp_monotonic_flag(void) { return V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC; }
static inline unsigned int cv4l2_timestamp_mask(void) { return V4L2_BUF_FLAG_TIMESTAMP_MASK; }

static inline unsigned int cv4l2_buf_type_video_capture(void) { return V4L2_BUF_TYPE_VIDEO_CAPTURE; }
static inline unsigned int cv4l2_cap_video_capture(void) { return V4L2_CAP_VIDEO_CAPTURE; }
static inline unsigned int cv4l2_cap_streaming(void) { return V4L2_CAP_STREAMING; }
static inline unsigned int cv4l2_cap_device_caps(void) { return V4L2_CAP_DEVICE_CAPS; }

/* Memory-to-memory codec devices (the stateful encoder API), multiplanar with one plane per
 * buffer: what the Raspberry Pi 4's bcm2835-codec and the kernel's vicodec both offer. Plain
 * ioctl on a plain open(): libv4l2's conversions are for cameras. */
static inline unsigned int cv4l2_cap_m2m_mplane(void) { return V4L2_CAP_VIDEO_M2M_MPLANE; }
static inline unsigned int cv4l2_buf_type_output_mplane(void) { return V4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE; }
static inline unsigned int cv4l2_buf_type_capture_mplane(void) { return V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE; }
static inline unsigned int cv4l2_buf_flag_keyframe(void) { return V4L2_BUF_FLAG_KEYFRAME; }
static inline unsigned int cv4l2_pix_fmt_yuv420(void) { return V4L2_PIX_FMT_YUV420; }
static inline int cv4l2_m2m_querycap(int fd, struct v4l2_capability *cap) { return ioctl(fd, VIDIOC_QUERYCAP, cap); }
static inline int cv4l2_m2m_enum_fmt(int fd, unsigned int type, unsigned int index, unsigned int *fourcc) {
    struct v4l2_fmtdesc d;
    memset(&d, 0, sizeof d);
    d.type = type;
    d.index = index;
    if (ioctl(fd, VIDIOC_ENUM_FMT, &d) < 0) return -1;
    *fourcc = d.pixelformat;
    return 0;
}
/* Returns the number of planes the driver chose (callend takes one), or -1. */
static inline int cv4l2_m2m_set_format(int fd, unsigned int type, unsigned int width, unsigned int height, unsigned int fourcc,
                                       unsigned int size, unsigned int *out_width, unsigned int *out_height,
                                       unsigned int *out_stride, unsigned int *out_size) {
    struct v4l2_format f;
    memset(&f, 0, sizeof f);
    f.type = type;
    f.fmt.pix_mp.width = width;
    f.fmt.pix_mp.height = height;
    f.fmt.pix_mp.pixelformat = fourcc;
    f.fmt.pix_mp.field = V4L2_FIELD_NONE;
    f.fmt.pix_mp.num_planes = 1;
    f.fmt.pix_mp.plane_fmt[0].sizeimage = size;
    if (ioctl(fd, VIDIOC_S_FMT, &f) < 0) return -1;
    *out_width = f.fmt.pix_mp.width;
    *out_height = f.fmt.pix_mp.height;
    *out_stride = f.fmt.pix_mp.plane_fmt[0].bytesperline;
    *out_size = f.fmt.pix_mp.plane_fmt[0].sizeimage;
    return f.fmt.pix_mp.num_planes;
}
static inline int cv4l2_m2m_frame_rate(int fd, unsigned int numerator, unsigned int denominator) {
    struct v4l2_streamparm p;
    memset(&p, 0, sizeof p);
    p.type = V4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE;
    p.parm.output.timeperframe.numerator = numerator;
    p.parm.output.timeperframe.denominator = denominator;
    return ioctl(fd, VIDIOC_S_PARM, &p);
}
static inline int cv4l2_m2m_request_buffers(int fd, unsigned int type, unsigned int count, unsigned int *granted) {
    return cv4l2_request_buffers_with(ioctl, fd, type, count, granted);
}
/* One multiplanar, memory-mapped buffer of a queue for one ioctl: its planes in `planes`. */
static inline int cv4l2_m2m_buffer_ioctl(int fd, unsigned long request, unsigned int type, unsigned int index,
                                         struct v4l2_buffer *b, struct v4l2_plane planes[VIDEO_MAX_PLANES]) {
    memset(b, 0, sizeof *b);
    memset(planes, 0, sizeof(struct v4l2_plane) * VIDEO_MAX_PLANES);
    b->type = type;
    b->memory = V4L2_MEMORY_MMAP;
    b->index = index;
    b->m.planes = planes;
    b->length = VIDEO_MAX_PLANES;
    return ioctl(fd, request, b);
}
static inline int cv4l2_m2m_query_buffer(int fd, unsigned int type, unsigned int index, unsigned int *offset, unsigned int *length) {
    struct v4l2_buffer b;
    struct v4l2_plane planes[VIDEO_MAX_PLANES];
    if (cv4l2_m2m_buffer_ioctl(fd, VIDIOC_QUERYBUF, type, index, &b, planes) < 0) return -1;
    *offset = planes[0].m.mem_offset;
    *length = planes[0].length;
    return 0;
}
static inline int cv4l2_m2m_queue(int fd, unsigned int type, unsigned int index, unsigned int bytes_used, long seconds, long microseconds) {
    struct v4l2_buffer b;
    struct v4l2_plane planes[VIDEO_MAX_PLANES];
    memset(&b, 0, sizeof b);
    memset(planes, 0, sizeof planes);
    b.type = type;
    b.memory = V4L2_MEMORY_MMAP;
    b.index = index;
    b.m.planes = planes;
    b.length = 1;
    planes[0].bytesused = bytes_used;
    b.timestamp.tv_sec = seconds;
    b.timestamp.tv_usec = microseconds;
    return ioctl(fd, VIDIOC_QBUF, &b);
}
static inline int cv4l2_m2m_dequeue(int fd, unsigned int type, unsigned int *index, unsigned int *bytes_used,
                                    long *seconds, long *microseconds, unsigned int *flags) {
    struct v4l2_buffer b;
    struct v4l2_plane planes[VIDEO_MAX_PLANES];
    if (cv4l2_m2m_buffer_ioctl(fd, VIDIOC_DQBUF, type, 0, &b, planes) < 0) return -1;
    *index = b.index;
    *bytes_used = planes[0].bytesused;
    *seconds = b.timestamp.tv_sec;
    *microseconds = b.timestamp.tv_usec;
    *flags = b.flags;
    return 0;
}
static inline int cv4l2_m2m_stream(int fd, unsigned int type, int on) { return cv4l2_stream_with(ioctl, fd, type, on); }
static inline int cv4l2_m2m_set_control(int fd, unsigned int id, int value) { return cv4l2_set_ext_control_with(ioctl, fd, id, value); }
static inline int cv4l2_m2m_has_control(int fd, unsigned int id) {
    struct v4l2_queryctrl q;
    memset(&q, 0, sizeof q);
    q.id = id;
    return ioctl(fd, VIDIOC_QUERYCTRL, &q) == 0 && !(q.flags & V4L2_CTRL_FLAG_DISABLED);
}
/* The visible part of the pictures (the device's coded size may be aligned larger). */
static inline int cv4l2_m2m_set_crop(int fd, unsigned int width, unsigned int height) {
    struct v4l2_selection s;
    memset(&s, 0, sizeof s);
    s.type = V4L2_BUF_TYPE_VIDEO_OUTPUT;
    s.target = V4L2_SEL_TGT_CROP;
    s.r.width = width;
    s.r.height = height;
    return ioctl(fd, VIDIOC_S_SELECTION, &s);
}
static inline unsigned int cv4l2_cid_gop_size(void) { return V4L2_CID_MPEG_VIDEO_GOP_SIZE; }
#endif
