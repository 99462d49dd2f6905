#include "ch264.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wels/codec_api.h>
#include <libavcodec/avcodec.h>

/* OpenH264 keeps its ABI per soname; Debian 12's libopenh264-7 (2.3.x) is the one these headers
   describe. */
#define OPENH264_SONAME "libopenh264.so.7"

static struct {
    int loaded;
    char error[256];
    int (*create)(ISVCEncoder **);
    void (*destroy)(ISVCEncoder *);
} wels;

static struct {
    int loaded;
    char error[256];
    const AVCodec *(*find_decoder)(enum AVCodecID);
    AVCodecContext *(*alloc_context)(const AVCodec *);
    int (*open)(AVCodecContext *, const AVCodec *, AVDictionary **);
    void (*free_context)(AVCodecContext **);
    AVPacket *(*packet_alloc)(void);
    void (*packet_free)(AVPacket **);
    AVFrame *(*frame_alloc)(void);
    void (*frame_free)(AVFrame **);
    void (*frame_unref)(AVFrame *);
    int (*send_packet)(AVCodecContext *, const AVPacket *);
    int (*receive_frame)(AVCodecContext *, AVFrame *);
    int (*strerror)(int, char *, size_t);
} av;

static pthread_once_t wels_once = PTHREAD_ONCE_INIT, av_once = PTHREAD_ONCE_INIT;

#define RESOLVE(lib, handle, field, name, soname)                                             \
    do {                                                                                      \
        *(void **)(&lib.field) = dlsym(handle, name);                                         \
        if (!lib.field) {                                                                     \
            snprintf(lib.error, sizeof lib.error, "%s has no %s", soname, name);              \
            return;                                                                           \
        }                                                                                     \
    } while (0)

static void load_wels(void) {
    void *handle = dlopen(OPENH264_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        snprintf(wels.error, sizeof wels.error, "cannot load %s (Debian: libopenh264-7): %s", OPENH264_SONAME, dlerror());
        return;
    }
    RESOLVE(wels, handle, create, "WelsCreateSVCEncoder", OPENH264_SONAME);
    RESOLVE(wels, handle, destroy, "WelsDestroySVCEncoder", OPENH264_SONAME);
    wels.loaded = 1;
}

static void load_av(void) {
    char name[64];
    snprintf(name, sizeof name, "libavcodec.so.%d", LIBAVCODEC_VERSION_MAJOR);
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        snprintf(av.error, sizeof av.error, "cannot load %s (Debian: libavcodec%d): %s", name, LIBAVCODEC_VERSION_MAJOR, dlerror());
        return;
    }
    RESOLVE(av, handle, find_decoder, "avcodec_find_decoder", name);
    RESOLVE(av, handle, alloc_context, "avcodec_alloc_context3", name);
    RESOLVE(av, handle, open, "avcodec_open2", name);
    RESOLVE(av, handle, free_context, "avcodec_free_context", name);
    RESOLVE(av, handle, packet_alloc, "av_packet_alloc", name);
    RESOLVE(av, handle, packet_free, "av_packet_free", name);
    RESOLVE(av, handle, frame_alloc, "av_frame_alloc", name);
    RESOLVE(av, handle, frame_free, "av_frame_free", name);
    RESOLVE(av, handle, frame_unref, "av_frame_unref", name);
    RESOLVE(av, handle, send_packet, "avcodec_send_packet", name);
    RESOLVE(av, handle, receive_frame, "avcodec_receive_frame", name);
    RESOLVE(av, handle, strerror, "av_strerror", name);  /* libavutil's, found through libavcodec */
    av.loaded = 1;
}

int ch264_encoder_load(char *err, size_t errlen) {
    pthread_once(&wels_once, load_wels);
    if (wels.loaded) return 0;
    snprintf(err, errlen, "%s", wels.error);
    return -1;
}

int ch264_decoder_load(char *err, size_t errlen) {
    pthread_once(&av_once, load_av);
    if (av.loaded) return 0;
    snprintf(err, errlen, "%s", av.error);
    return -1;
}

struct ch264_encoder {
    ISVCEncoder *wels;
    int width, height;
    uint8_t *buffer;
    size_t capacity;
};

ch264_encoder *ch264_encoder_open(int width, int height, float frame_rate, int bitrate, int keyframe_interval,
                                  int threads, char *err, size_t errlen) {
    if (ch264_encoder_load(err, errlen) != 0) return NULL;
    ch264_encoder *e = calloc(1, sizeof *e);
    if (!e) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (wels.create(&e->wels) != 0 || !e->wels) {
        snprintf(err, errlen, "WelsCreateSVCEncoder failed");
        free(e);
        return NULL;
    }
    ISVCEncoder *w = e->wels;
    int quiet = WELS_LOG_QUIET;
    (*w)->SetOption(w, ENCODER_OPTION_TRACE_LEVEL, &quiet);
    SEncParamExt p;
    memset(&p, 0, sizeof p);
    (*w)->GetDefaultParams(w, &p);
    p.iUsageType = CAMERA_VIDEO_REAL_TIME;
    p.iPicWidth = width;
    p.iPicHeight = height;
    p.iTargetBitrate = bitrate;
    p.iMaxBitrate = UNSPECIFIED_BIT_RATE;
    p.iRCMode = RC_BITRATE_MODE;
    p.fMaxFrameRate = frame_rate;
    /* A picture the rate control cannot afford is skipped rather than overshooting: on a thin
       link a late picture is worse than a missing one. */
    p.bEnableFrameSkip = true;
    p.uiIntraPeriod = (unsigned int)keyframe_interval;
    p.eSpsPpsIdStrategy = CONSTANT_ID;
    p.iComplexityMode = LOW_COMPLEXITY;
    p.iNumRefFrame = 1;
    p.iEntropyCodingModeFlag = 0;
    p.iTemporalLayerNum = 1;
    p.iSpatialLayerNum = 1;
    p.iMultipleThreadIdc = (unsigned short)(threads > 0 ? threads : 1);
    p.bEnableDenoise = false;
    p.bEnableBackgroundDetection = true;
    p.bEnableAdaptiveQuant = true;
    p.bEnableSceneChangeDetect = false;  /* IDRs come when asked (PLI) or on the interval */
    p.sSpatialLayers[0].iVideoWidth = width;
    p.sSpatialLayers[0].iVideoHeight = height;
    p.sSpatialLayers[0].fFrameRate = frame_rate;
    p.sSpatialLayers[0].iSpatialBitrate = bitrate;
    p.sSpatialLayers[0].iMaxSpatialBitrate = UNSPECIFIED_BIT_RATE;
    p.sSpatialLayers[0].uiProfileIdc = PRO_BASELINE;
    p.sSpatialLayers[0].sSliceArgument.uiSliceMode = SM_SINGLE_SLICE;
    p.sSpatialLayers[0].sSliceArgument.uiSliceNum = 1;
    int rc = (*w)->InitializeExt(w, &p);
    if (rc != 0) {
        snprintf(err, errlen, "OpenH264 InitializeExt (%dx%d, %.1f fps, %d bit/s) returned %d", width, height,
                 (double)frame_rate, bitrate, rc);
        wels.destroy(w);
        free(e);
        return NULL;
    }
    e->width = width;
    e->height = height;
    return e;
}

int ch264_encoder_set_rate(ch264_encoder *e, int bitrate, float frame_rate) {
    ISVCEncoder *w = e->wels;
    SBitrateInfo info = { SPATIAL_LAYER_ALL, bitrate };
    int rc = (*w)->SetOption(w, ENCODER_OPTION_BITRATE, &info);
    if (rc != 0) return rc;
    return (*w)->SetOption(w, ENCODER_OPTION_FRAME_RATE, &frame_rate);
}

int ch264_encoder_force_idr(ch264_encoder *e) {
    return (*e->wels)->ForceIntraFrame(e->wels, true);
}

int ch264_encoder_encode(ch264_encoder *e, const uint8_t *y, int stride_y, const uint8_t *u, int stride_u,
                         const uint8_t *v, int stride_v, int64_t timestamp_ms,
                         const uint8_t **out, size_t *out_size, int *keyframe, int *qp) {
    ISVCEncoder *w = e->wels;
    SSourcePicture picture;
    memset(&picture, 0, sizeof picture);
    picture.iColorFormat = videoFormatI420;
    picture.iPicWidth = e->width;
    picture.iPicHeight = e->height;
    picture.iStride[0] = stride_y;
    picture.iStride[1] = stride_u;
    picture.iStride[2] = stride_v;
    picture.pData[0] = (unsigned char *)y;
    picture.pData[1] = (unsigned char *)u;
    picture.pData[2] = (unsigned char *)v;
    picture.uiTimeStamp = timestamp_ms;
    SFrameBSInfo info;
    memset(&info, 0, sizeof info);
    int rc = (*w)->EncodeFrame(w, &picture, &info);
    if (rc != 0) return -abs(rc);
    *out = e->buffer;
    *out_size = 0;
    *keyframe = info.eFrameType == videoFrameTypeIDR;
    *qp = -1;
    if (info.eFrameType == videoFrameTypeSkip || info.iFrameSizeInBytes <= 0) return 0;
    /* The layers' NAL units (each behind its start code) sit in OpenH264's buffers: gather them. */
    size_t total = 0;
    for (int layer = 0; layer < info.iLayerNum; layer++) {
        for (int n = 0; n < info.sLayerInfo[layer].iNalCount; n++) total += (size_t)info.sLayerInfo[layer].pNalLengthInByte[n];
    }
    if (total > e->capacity) {
        uint8_t *grown = realloc(e->buffer, total);
        if (!grown) return -1;
        e->buffer = grown;
        e->capacity = total;
    }
    size_t offset = 0;
    for (int layer = 0; layer < info.iLayerNum; layer++) {
        size_t size = 0;
        for (int n = 0; n < info.sLayerInfo[layer].iNalCount; n++) size += (size_t)info.sLayerInfo[layer].pNalLengthInByte[n];
        memcpy(e->buffer + offset, info.sLayerInfo[layer].pBsBuf, size);
        offset += size;
    }
    SEncoderStatistics statistics;
    memset(&statistics, 0, sizeof statistics);
    if ((*w)->GetOption(w, ENCODER_OPTION_GET_STATISTICS, &statistics) == 0) *qp = (int)statistics.uiAverageFrameQP;
    *out = e->buffer;
    *out_size = offset;
    return 0;
}

void ch264_encoder_close(ch264_encoder *e) {
    if (!e) return;
    (*e->wels)->Uninitialize(e->wels);
    wels.destroy(e->wels);
    free(e->buffer);
    free(e);
}

struct ch264_decoder {
    AVCodecContext *context;
    AVPacket *packet;
    AVFrame *frame;
    /* libavcodec reads up to AV_INPUT_BUFFER_PADDING_SIZE bytes past a packet's end: the
       caller's bytes are copied into this buffer, zero-padded. */
    uint8_t *input;
    size_t capacity;
};

ch264_decoder *ch264_decoder_open(char *err, size_t errlen) {
    if (ch264_decoder_load(err, errlen) != 0) return NULL;
    const AVCodec *codec = av.find_decoder(AV_CODEC_ID_H264);
    if (!codec) { snprintf(err, errlen, "libavcodec has no H.264 decoder"); return NULL; }
    ch264_decoder *d = calloc(1, sizeof *d);
    if (!d) { snprintf(err, errlen, "out of memory"); return NULL; }
    d->context = av.alloc_context(codec);
    d->packet = av.packet_alloc();
    d->frame = av.frame_alloc();
    if (!d->context || !d->packet || !d->frame) {
        snprintf(err, errlen, "out of memory");
        ch264_decoder_close(d);
        return NULL;
    }
    /* A picture out for every access unit in: one thread, no frame reordering delay. */
    d->context->thread_count = 1;
    d->context->flags |= AV_CODEC_FLAG_LOW_DELAY;
    int rc = av.open(d->context, codec, NULL);
    if (rc < 0) {
        char reason[128];
        av.strerror(rc, reason, sizeof reason);
        snprintf(err, errlen, "avcodec_open2 (h264): %s", reason);
        ch264_decoder_close(d);
        return NULL;
    }
    return d;
}

int ch264_decoder_decode(ch264_decoder *d, const uint8_t *data, size_t size,
                         const uint8_t **y, int *stride_y, const uint8_t **u, int *stride_u,
                         const uint8_t **v, int *stride_v, int *width, int *height) {
    av.frame_unref(d->frame);
    if (size > INT32_MAX - AV_INPUT_BUFFER_PADDING_SIZE) return AVERROR(EINVAL);
    if (size + AV_INPUT_BUFFER_PADDING_SIZE > d->capacity) {
        uint8_t *grown = realloc(d->input, size + AV_INPUT_BUFFER_PADDING_SIZE);
        if (!grown) return AVERROR(ENOMEM);
        d->input = grown;
        d->capacity = size + AV_INPUT_BUFFER_PADDING_SIZE;
    }
    memcpy(d->input, data, size);
    memset(d->input + size, 0, AV_INPUT_BUFFER_PADDING_SIZE);
    d->packet->data = d->input;
    d->packet->size = (int)size;
    int rc = av.send_packet(d->context, d->packet);
    d->packet->data = NULL;
    d->packet->size = 0;
    if (rc < 0) return rc;
    rc = av.receive_frame(d->context, d->frame);
    if (rc == AVERROR(EAGAIN)) return 0;
    if (rc < 0) return rc;
    if (d->frame->format != AV_PIX_FMT_YUV420P && d->frame->format != AV_PIX_FMT_YUVJ420P) return AVERROR_PATCHWELCOME;
    *y = d->frame->data[0];
    *u = d->frame->data[1];
    *v = d->frame->data[2];
    *stride_y = d->frame->linesize[0];
    *stride_u = d->frame->linesize[1];
    *stride_v = d->frame->linesize[2];
    *width = d->frame->width;
    *height = d->frame->height;
    return 1;
}

void ch264_decoder_error(int code, char *err, size_t errlen) {
    if (code == AVERROR_PATCHWELCOME) {
        snprintf(err, errlen, "a picture format other than 4:2:0 (only 4:2:0 is taken)");
    } else if (!av.loaded || av.strerror(code, err, errlen) < 0) {
        snprintf(err, errlen, "libavcodec error %d", code);
    }
}

void ch264_decoder_close(ch264_decoder *d) {
    if (!d) return;
    if (d->frame) av.frame_free(&d->frame);
    if (d->packet) av.packet_free(&d->packet);
    if (d->context) av.free_context(&d->context);
    free(d->input);
    free(d);
}
