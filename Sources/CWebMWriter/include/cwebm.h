#ifndef CALLEND_CWEBM_H
#define CALLEND_CWEBM_H
/* A live WebM writer (VP8 video and Opus audio, no re-encode) over libavformat's Matroska muxer,
   writing to a file descriptor the caller owns. libavformat (and the codec libraries it links)
   is loaded with dlopen on first use, so an endpoint that records nothing never maps it.
   Output is written as a stream that never seeks: an unknown-size segment and clusters of at
   most cluster_ms, each written to the descriptor whole as it closes, so a process killed at
   any moment leaves a file readable up to its last closed cluster. Plain C types only. */
#include <stddef.h>
#include <stdint.h>

typedef struct cwebm_writer cwebm_writer;

/* Loads libavformat; 0 on success, else -1 and a reason in err. */
int cwebm_load(char *err, size_t errlen);

/* A writer on fd with a VP8 track (width x height) and, when opus_head is not NULL, an Opus
   track (its OpusHead, RFC 7845). NULL and a reason in err on failure. */
cwebm_writer *cwebm_open(int fd, int width, int height, const uint8_t *opus_head, size_t opus_head_length,
                         int cluster_ms, char *err, size_t errlen);

/* Writes one frame: track 0 video, 1 audio; pts in milliseconds from the file's start, not
   below the track's last. 0 on success, else a negative libavformat error. */
int cwebm_write(cwebm_writer *w, int track, const uint8_t *data, size_t length, int64_t pts_ms, int keyframe);

/* Writes what is buffered and the trailer, frees the writer (the descriptor stays open).
   0 on success, else a negative libavformat error. */
int cwebm_close(cwebm_writer *w);

#endif
