#ifndef CALLEND_CV4L2_SHIM_H
#define CALLEND_CV4L2_SHIM_H
#include <libv4l2.h>
#include <linux/videodev2.h>
#include <string.h>

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

static inline unsigned int cv4l2_buf_type_video_capture(void) { return V4L2_BUF_TYPE_VIDEO_CAPTURE; }
static inline unsigned int cv4l2_cap_video_capture(void) { return V4L2_CAP_VIDEO_CAPTURE; }
static inline unsigned int cv4l2_cap_streaming(void) { return V4L2_CAP_STREAMING; }
static inline unsigned int cv4l2_cap_device_caps(void) { return V4L2_CAP_DEVICE_CAPS; }
#endif
