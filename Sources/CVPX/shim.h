#ifndef CALLEND_CVPX_SHIM_H
#define CALLEND_CVPX_SHIM_H
#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>

/* vpx_codec_enc_init / vpx_codec_dec_init are macros over *_ver functions, and
   vpx_codec_control is a variadic macro: typed wrappers make them callable from Swift. */

static inline vpx_codec_err_t cvpx_vp8_enc_config_default(vpx_codec_enc_cfg_t *cfg) {
    return vpx_codec_enc_config_default(vpx_codec_vp8_cx(), cfg, 0);
}
static inline vpx_codec_err_t cvpx_vp8_enc_init(vpx_codec_ctx_t *ctx, const vpx_codec_enc_cfg_t *cfg) {
    return vpx_codec_enc_init(ctx, vpx_codec_vp8_cx(), cfg, 0);
}
static inline vpx_codec_err_t cvpx_vp8_dec_init(vpx_codec_ctx_t *ctx, unsigned int threads) {
    vpx_codec_dec_cfg_t cfg = { threads, 0, 0 };
    return vpx_codec_dec_init(ctx, vpx_codec_vp8_dx(), &cfg, 0);
}
static inline vpx_codec_err_t cvpx_set_cpu_used(vpx_codec_ctx_t *ctx, int value) {
    return vpx_codec_control(ctx, VP8E_SET_CPUUSED, value);
}
static inline vpx_codec_err_t cvpx_set_static_threshold(vpx_codec_ctx_t *ctx, unsigned int value) {
    return vpx_codec_control(ctx, VP8E_SET_STATIC_THRESHOLD, value);
}
static inline vpx_codec_err_t cvpx_set_noise_sensitivity(vpx_codec_ctx_t *ctx, unsigned int value) {
    return vpx_codec_control(ctx, VP8E_SET_NOISE_SENSITIVITY, value);
}
static inline vpx_codec_err_t cvpx_set_token_partitions(vpx_codec_ctx_t *ctx, int value) {
    return vpx_codec_control(ctx, VP8E_SET_TOKEN_PARTITIONS, value);
}
static inline vpx_codec_err_t cvpx_set_max_intra_bitrate_pct(vpx_codec_ctx_t *ctx, unsigned int value) {
    return vpx_codec_control(ctx, VP8E_SET_MAX_INTRA_BITRATE_PCT, value);
}
static inline vpx_codec_err_t cvpx_get_last_quantizer(vpx_codec_ctx_t *ctx, int *value) {
    return vpx_codec_control(ctx, VP8E_GET_LAST_QUANTIZER_64, value);
}
static inline vpx_codec_err_t cvpx_get_frame_corrupted(vpx_codec_ctx_t *ctx, int *value) {
    return vpx_codec_control(ctx, VP8D_GET_FRAME_CORRUPTED, value);
}

/* vpx_codec_cx_pkt_t keeps its payload in a union; these read the frame member. */
static inline int cvpx_pkt_is_frame(const vpx_codec_cx_pkt_t *pkt) {
    return pkt->kind == VPX_CODEC_CX_FRAME_PKT;
}
static inline const void *cvpx_pkt_frame_buf(const vpx_codec_cx_pkt_t *pkt) { return pkt->data.frame.buf; }
static inline size_t cvpx_pkt_frame_size(const vpx_codec_cx_pkt_t *pkt) { return pkt->data.frame.sz; }
static inline int cvpx_pkt_frame_is_key(const vpx_codec_cx_pkt_t *pkt) {
    return (pkt->data.frame.flags & VPX_FRAME_IS_KEY) != 0;
}
static inline vpx_codec_pts_t cvpx_pkt_frame_pts(const vpx_codec_cx_pkt_t *pkt) { return pkt->data.frame.pts; }

static inline vpx_enc_frame_flags_t cvpx_flag_force_keyframe(void) { return VPX_EFLAG_FORCE_KF; }
/* Temporal layers: which reference buffers a frame may use and update (the altref never). A
   frame that updates none updates no entropy either, so dropping it leaves the rest decodable. */
static inline vpx_enc_frame_flags_t cvpx_layer_flags(int refs_golden, int updates_last, int updates_golden) {
    vpx_enc_frame_flags_t flags = VP8_EFLAG_NO_REF_ARF | VP8_EFLAG_NO_UPD_ARF;
    if (!refs_golden) flags |= VP8_EFLAG_NO_REF_GF;
    if (!updates_last) flags |= VP8_EFLAG_NO_UPD_LAST;
    if (!updates_golden) flags |= VP8_EFLAG_NO_UPD_GF;
    if (!updates_last && !updates_golden) flags |= VP8_EFLAG_NO_UPD_ENTROPY;
    return flags;
}
static inline vpx_codec_err_t cvpx_set_temporal_layer_id(vpx_codec_ctx_t *ctx, int layer) {
    return vpx_codec_control(ctx, VP8E_SET_TEMPORAL_LAYER_ID, layer);
}
static inline unsigned long cvpx_deadline_realtime(void) { return VPX_DL_REALTIME; }

static inline unsigned char *cvpx_image_plane(const vpx_image_t *img, int plane) { return img->planes[plane]; }
static inline int cvpx_image_stride(const vpx_image_t *img, int plane) { return img->stride[plane]; }

#endif
