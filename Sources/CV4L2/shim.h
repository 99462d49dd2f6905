#ifndef CALLEND_CV4L2_SHIM_H
#define CALLEND_CV4L2_SHIM_H
#include <libv4l2.h>
#include <linux/videodev2.h>

/* VIDIOC_* request numbers are macros built from _IOWR(); Swift cannot evaluate them. */
/* v4l2_open is variadic (like open(2)); this fixes its mode argument. */
static inline int cv4l2_open(const char *path, int flags) { return v4l2_open(path, flags); }
static inline int cv4l2_querycap(int fd, struct v4l2_capability *cap) {
    return v4l2_ioctl(fd, VIDIOC_QUERYCAP, cap);
}
#endif
