#ifndef CALLEND_CVOICE_H
#define CALLEND_CVOICE_H
/* Voice processing for one microphone (webrtc-audio-processing 0.3, the library GStreamer's
   webrtcdsp uses): acoustic echo cancellation against what the speaker plays, noise suppression,
   gain control, a high-pass filter and voice activity detection, on mono 16-bit audio in 10 ms
   chunks. Render (the far end, as it goes to the speaker) and capture (the microphone) may come
   from two threads; the library locks inside. Plain C types only, so Swift never sees C++. */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cvoice cvoice;

typedef struct {
    int echo_cancellation;
    int echo_suppression;    /* 0 low, 1 moderate, 2 high: more echo gone, less near end in double talk */
    int noise_suppression;   /* 0 off; 1 low, 2 moderate, 3 high, 4 very high */
    int gain_control;        /* adaptive digital gain towards -3 dBFS, with a limiter */
    int high_pass;
    int voice_detection;
    int extended_filter;     /* longer echo tails, more robust delay handling */
    int delay_agnostic;      /* estimates the render-to-capture delay itself */
} cvoice_options;

/* NULL when the library refuses the setup. Rates: 8000, 16000, 32000 or 48000 Hz. */
cvoice *cvoice_create(int sample_rate, const cvoice_options *options);
void cvoice_destroy(cvoice *voice);
/* Frames per channel in one chunk: rate / 100. */
int cvoice_chunk_frames(const cvoice *voice);
/* One chunk of far-end audio, as played. 0, or the library's error code. */
int cvoice_render(cvoice *voice, const int16_t *mono);
/* One chunk of microphone audio, processed in place; delay_ms: render-to-capture delay as the
   devices see it (the hint the delay-agnostic mode starts from). 0, or the error code. */
int cvoice_capture(cvoice *voice, int16_t *mono, int delay_ms);

typedef struct {
    int has_metrics;         /* the echo canceller's figures are valid */
    int erle_db;             /* echo return loss enhancement, average */
    int erle_instant_db;
    int erl_db;              /* echo return loss of the path */
    int delay_median_ms;     /* the canceller's delay estimate; -1 unknown */
    int delay_std_ms;
    float fraction_poor_delays;
    int stream_has_echo;     /* the last capture chunk may contain echo */
    int stream_has_voice;    /* the last capture chunk has speech (voice detection on) */
} cvoice_stats;

void cvoice_get_stats(cvoice *voice, cvoice_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
