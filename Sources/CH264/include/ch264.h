#ifndef CALLEND_CH264_H
#define CALLEND_CH264_H
/* H.264 in software: an encoder over OpenH264 (Cisco's, Debian's libopenh264) and a decoder over
   libavcodec's h264 (Debian's FFmpeg). Both libraries are loaded with dlopen on first use, so an
   endpoint that sends and receives VP8 never maps them, and a box without them still runs VP8.
   Plain C types only; one caller thread per encoder or decoder. */
#include <stddef.h>
#include <stdint.h>

typedef struct ch264_encoder ch264_encoder;
typedef struct ch264_decoder ch264_decoder;

/* Loads OpenH264 / libavcodec; 0 on success, else -1 and a reason in err. */
int ch264_encoder_load(char *err, size_t errlen);
int ch264_decoder_load(char *err, size_t errlen);

/* A realtime constrained-baseline encoder (one slice per picture, parameter set id 0, CAVLC);
   bitrate in bit/s. NULL and a reason in err on failure. */
ch264_encoder *ch264_encoder_open(int width, int height, float frame_rate, int bitrate, int keyframe_interval,
                                  int threads, char *err, size_t errlen);
/* Changes the target bitrate and frame rate of a running encoder; 0 on success. */
int ch264_encoder_set_rate(ch264_encoder *e, int bitrate, float frame_rate);
/* The next picture is an IDR (with its parameter sets); 0 on success. */
int ch264_encoder_force_idr(ch264_encoder *e);
/* Encodes one I420 picture. On success (0) *out points at an Annex B access unit of *out_size
   bytes, valid until the next call (size 0: the rate control skipped the picture), *keyframe is
   1 for an IDR and *qp the picture's average quantizer (0-51). Else a negative OpenH264 error. */
int ch264_encoder_encode(ch264_encoder *e, const uint8_t *y, int stride_y, const uint8_t *u, int stride_u,
                         const uint8_t *v, int stride_v, int64_t timestamp_ms,
                         const uint8_t **out, size_t *out_size, int *keyframe, int *qp);
void ch264_encoder_close(ch264_encoder *e);

/* A decoder for what cameras and browsers send (baseline, main and high profile, 4:2:0). */
ch264_decoder *ch264_decoder_open(char *err, size_t errlen);
/* Decodes one Annex B access unit. 1 and the picture's planes (valid until the next call) when a
   picture came out, 0 when none did, else a negative libavcodec error (a damaged or unsupported
   stream: ask for an IDR). */
int ch264_decoder_decode(ch264_decoder *d, const uint8_t *data, size_t size,
                         const uint8_t **y, int *stride_y, const uint8_t **u, int *stride_u,
                         const uint8_t **v, int *stride_v, int *width, int *height);
/* A readable reason for a negative result of ch264_decoder_decode. */
void ch264_decoder_error(int code, char *err, size_t errlen);
void ch264_decoder_close(ch264_decoder *d);

#endif
