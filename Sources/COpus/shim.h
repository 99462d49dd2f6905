#ifndef CALLEND_COPUS_SHIM_H
#define CALLEND_COPUS_SHIM_H
#include <opus/opus.h>

/* opus_encoder_ctl / opus_decoder_ctl are variadic and their requests are macros:
   Swift can call neither, so each request we use gets a typed wrapper. */

static inline int copus_encoder_set_bitrate(OpusEncoder *enc, opus_int32 bps) {
    return opus_encoder_ctl(enc, OPUS_SET_BITRATE(bps));
}
static inline int copus_encoder_get_bitrate(OpusEncoder *enc, opus_int32 *bps) {
    return opus_encoder_ctl(enc, OPUS_GET_BITRATE(bps));
}
static inline int copus_encoder_set_complexity(OpusEncoder *enc, opus_int32 complexity) {
    return opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(complexity));
}
static inline int copus_encoder_set_inband_fec(OpusEncoder *enc, opus_int32 on) {
    return opus_encoder_ctl(enc, OPUS_SET_INBAND_FEC(on));
}
static inline int copus_encoder_set_packet_loss_perc(OpusEncoder *enc, opus_int32 percent) {
    return opus_encoder_ctl(enc, OPUS_SET_PACKET_LOSS_PERC(percent));
}
static inline int copus_encoder_set_dtx(OpusEncoder *enc, opus_int32 on) {
    return opus_encoder_ctl(enc, OPUS_SET_DTX(on));
}
static inline int copus_encoder_set_vbr(OpusEncoder *enc, opus_int32 on) {
    return opus_encoder_ctl(enc, OPUS_SET_VBR(on));
}
static inline int copus_encoder_get_lookahead(OpusEncoder *enc, opus_int32 *samples) {
    return opus_encoder_ctl(enc, OPUS_GET_LOOKAHEAD(samples));
}
static inline int copus_encoder_get_in_dtx(OpusEncoder *enc, opus_int32 *flag) {
    return opus_encoder_ctl(enc, OPUS_GET_IN_DTX(flag));
}
static inline int copus_decoder_get_last_packet_duration(OpusDecoder *dec, opus_int32 *samples) {
    return opus_decoder_ctl(dec, OPUS_GET_LAST_PACKET_DURATION(samples));
}
static inline int copus_application_voip(void) { return OPUS_APPLICATION_VOIP; }
static inline int copus_application_audio(void) { return OPUS_APPLICATION_AUDIO; }
static inline int copus_application_restricted_lowdelay(void) { return OPUS_APPLICATION_RESTRICTED_LOWDELAY; }

#endif
