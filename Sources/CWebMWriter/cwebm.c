#include "cwebm.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>

/* The libavformat and libavutil functions used, resolved from the loaded library (dlsym on its
   handle also finds libavutil, which it links). */
static struct {
    int loaded;
    char error[256];
    int (*alloc_output_context2)(AVFormatContext **, const AVOutputFormat *, const char *, const char *);
    AVStream *(*new_stream)(AVFormatContext *, const AVCodec *);
    AVIOContext *(*alloc_context)(unsigned char *, int, int, void *, int (*)(void *, uint8_t *, int),
                                  int (*)(void *, uint8_t *, int), int64_t (*)(void *, int64_t, int));
    void (*context_free)(AVIOContext **);
    int (*write_header)(AVFormatContext *, AVDictionary **);
    int (*write_frame)(AVFormatContext *, AVPacket *);
    int (*write_trailer)(AVFormatContext *);
    void (*free_context)(AVFormatContext *);
    void (*flush)(AVIOContext *);
    void *(*malloc)(size_t);
    void *(*mallocz)(size_t);
    void (*free)(void *);
    int (*dict_set)(AVDictionary **, const char *, const char *, int);
    void (*dict_free)(AVDictionary **);
    void (*channel_layout_default)(AVChannelLayout *, int);
} av;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

#define RESOLVE(handle, field, name)                                                          \
    do {                                                                                      \
        *(void **)(&av.field) = dlsym(handle, name);                                          \
        if (!av.field) {                                                                      \
            snprintf(av.error, sizeof av.error, "libavformat.so.%d has no %s", LIBAVFORMAT_VERSION_MAJOR, name); \
            return;                                                                           \
        }                                                                                     \
    } while (0)

static void load(void) {
    char name[64];
    snprintf(name, sizeof name, "libavformat.so.%d", LIBAVFORMAT_VERSION_MAJOR);
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        snprintf(av.error, sizeof av.error, "cannot load %s (Debian: libavformat%d): %s", name, LIBAVFORMAT_VERSION_MAJOR, dlerror());
        return;
    }
    RESOLVE(handle, alloc_output_context2, "avformat_alloc_output_context2");
    RESOLVE(handle, new_stream, "avformat_new_stream");
    RESOLVE(handle, alloc_context, "avio_alloc_context");
    RESOLVE(handle, context_free, "avio_context_free");
    RESOLVE(handle, write_header, "avformat_write_header");
    RESOLVE(handle, write_frame, "av_write_frame");
    RESOLVE(handle, write_trailer, "av_write_trailer");
    RESOLVE(handle, free_context, "avformat_free_context");
    RESOLVE(handle, flush, "avio_flush");
    RESOLVE(handle, malloc, "av_malloc");
    RESOLVE(handle, mallocz, "av_mallocz");
    RESOLVE(handle, free, "av_free");
    RESOLVE(handle, dict_set, "av_dict_set");
    RESOLVE(handle, dict_free, "av_dict_free");
    RESOLVE(handle, channel_layout_default, "av_channel_layout_default");
    av.loaded = 1;
}

int cwebm_load(char *err, size_t errlen) {
    pthread_once(&load_once, load);
    if (av.loaded) return 0;
    snprintf(err, errlen, "%s", av.error);
    return -1;
}

struct cwebm_writer {
    AVFormatContext *format;
    AVIOContext *io;
    int fd;
    int tracks;
    int64_t last_pts[2];
};

static int write_all(void *opaque, uint8_t *data, int length) {
    cwebm_writer *w = opaque;
    int done = 0;
    while (done < length) {
        ssize_t n = write(w->fd, data + done, (size_t)(length - done));
        if (n < 0) {
            if (errno == EINTR) continue;
            return AVERROR(errno);
        }
        done += (int)n;
    }
    return length;
}

static void release(cwebm_writer *w) {
    if (w->format) av.free_context(w->format);
    if (w->io) {
        av.free(w->io->buffer);
        av.context_free(&w->io);
    }
    av.free(w);
}

cwebm_writer *cwebm_open(int fd, int width, int height, const uint8_t *opus_head, size_t opus_head_length,
                         int cluster_ms, char *err, size_t errlen) {
    if (cwebm_load(err, errlen) != 0) return NULL;
    cwebm_writer *w = av.mallocz(sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    w->fd = fd;
    w->last_pts[0] = w->last_pts[1] = INT64_MIN;
    int status = av.alloc_output_context2(&w->format, NULL, "webm", NULL);
    if (status < 0 || !w->format) {
        snprintf(err, errlen, "libavformat has no WebM muxer (%d)", status);
        release(w);
        return NULL;
    }
    const int buffer_size = 64 * 1024;
    unsigned char *buffer = av.malloc(buffer_size);
    w->io = buffer ? av.alloc_context(buffer, buffer_size, 1, w, NULL, write_all, NULL) : NULL;
    if (!w->io) {
        av.free(buffer);
        snprintf(err, errlen, "out of memory");
        release(w);
        return NULL;
    }
    w->io->seekable = 0;
    w->format->pb = w->io;
    w->format->flags |= AVFMT_FLAG_CUSTOM_IO | AVFMT_FLAG_FLUSH_PACKETS;

    AVStream *video = av.new_stream(w->format, NULL);
    if (!video) goto nomem;
    video->time_base = (AVRational){1, 1000};
    video->codecpar->codec_type = AVMEDIA_TYPE_VIDEO;
    video->codecpar->codec_id = AV_CODEC_ID_VP8;
    video->codecpar->width = width;
    video->codecpar->height = height;
    w->tracks = 1;
    if (opus_head) {
        AVStream *audio = av.new_stream(w->format, NULL);
        if (!audio) goto nomem;
        audio->time_base = (AVRational){1, 1000};
        audio->codecpar->codec_type = AVMEDIA_TYPE_AUDIO;
        audio->codecpar->codec_id = AV_CODEC_ID_OPUS;
        audio->codecpar->sample_rate = 48000;
        av.channel_layout_default(&audio->codecpar->ch_layout, opus_head_length > 9 ? opus_head[9] : 1);
        audio->codecpar->extradata = av.mallocz(opus_head_length + AV_INPUT_BUFFER_PADDING_SIZE);
        if (!audio->codecpar->extradata) goto nomem;
        memcpy(audio->codecpar->extradata, opus_head, opus_head_length);
        audio->codecpar->extradata_size = (int)opus_head_length;
        if (opus_head_length >= 12) audio->codecpar->initial_padding = opus_head[10] | (opus_head[11] << 8);
        w->tracks = 2;
    }
    AVDictionary *options = NULL;
    char limit[32];
    snprintf(limit, sizeof limit, "%d", cluster_ms);
    av.dict_set(&options, "live", "1", 0);
    av.dict_set(&options, "cluster_time_limit", limit, 0);
    av.dict_set(&options, "cluster_size_limit", "4194304", 0);
    status = av.write_header(w->format, &options);
    av.dict_free(&options);
    if (status < 0) {
        snprintf(err, errlen, "cannot write the WebM header (libavformat error %d)", status);
        release(w);
        return NULL;
    }
    av.flush(w->io);
    return w;
nomem:
    snprintf(err, errlen, "out of memory");
    release(w);
    return NULL;
}

int cwebm_write(cwebm_writer *w, int track, const uint8_t *data, size_t length, int64_t pts_ms, int keyframe) {
    if (track < 0 || track >= w->tracks || length == 0 || length > INT32_MAX) return AVERROR(EINVAL);
    if (pts_ms < w->last_pts[track]) return AVERROR(EINVAL);
    w->last_pts[track] = pts_ms;
    AVPacket packet;
    memset(&packet, 0, sizeof packet);
    packet.data = (uint8_t *)data;
    packet.size = (int)length;
    packet.stream_index = track;
    packet.pts = packet.dts = pts_ms;
    packet.flags = keyframe ? AV_PKT_FLAG_KEY : 0;
    packet.pos = -1;
    return av.write_frame(w->format, &packet);
}

int cwebm_close(cwebm_writer *w) {
    int status = av.write_trailer(w->format);
    av.flush(w->io);
    release(w);
    return status;
}
