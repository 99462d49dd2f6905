// The C face of webrtc::AudioProcessing (see cvoice.h).
#include "cvoice.h"
#include <webrtc/common.h>
#include <webrtc/modules/audio_processing/include/audio_processing.h>
#include <webrtc/modules/interface/module_common_types.h>
#include <cstring>
#include <new>

struct cvoice {
    webrtc::AudioProcessing *apm;
    int rate;
    int frames;
    webrtc::AudioFrame render;
    webrtc::AudioFrame capture;
};

static void prepare(webrtc::AudioFrame &frame, int rate, int frames) {
    frame.sample_rate_hz_ = rate;
    frame.samples_per_channel_ = frames;
    frame.num_channels_ = 1;
}

extern "C" cvoice *cvoice_create(int sample_rate, const cvoice_options *options) {
    if (sample_rate != 8000 && sample_rate != 16000 && sample_rate != 32000 && sample_rate != 48000) return nullptr;
    webrtc::Config config;
    config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(options->extended_filter != 0));
    config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(options->delay_agnostic != 0));
    // The experimental AGC steers an analog microphone volume, which callend does not touch.
    config.Set<webrtc::ExperimentalAgc>(new webrtc::ExperimentalAgc(false));
    webrtc::AudioProcessing *apm = webrtc::AudioProcessing::Create(config);
    if (!apm) return nullptr;
    using AP = webrtc::AudioProcessing;
    bool ok = apm->Initialize(sample_rate, sample_rate, sample_rate, AP::kMono, AP::kMono, AP::kMono) == AP::kNoError;
    ok = ok && apm->echo_cancellation()->Enable(options->echo_cancellation != 0) == AP::kNoError;
    if (options->echo_cancellation) {
        ok = ok && apm->echo_cancellation()->set_suppression_level(options->echo_suppression <= 0 ? webrtc::EchoCancellation::kLowSuppression : options->echo_suppression == 1 ? webrtc::EchoCancellation::kModerateSuppression : webrtc::EchoCancellation::kHighSuppression) == AP::kNoError;
        ok = ok && apm->echo_cancellation()->enable_metrics(true) == AP::kNoError;
        ok = ok && apm->echo_cancellation()->enable_delay_logging(true) == AP::kNoError;
    }
    if (options->noise_suppression > 0) {
        static const webrtc::NoiseSuppression::Level levels[] = {
            webrtc::NoiseSuppression::kLow, webrtc::NoiseSuppression::kModerate,
            webrtc::NoiseSuppression::kHigh, webrtc::NoiseSuppression::kVeryHigh};
        int index = options->noise_suppression > 4 ? 3 : options->noise_suppression - 1;
        ok = ok && apm->noise_suppression()->set_level(levels[index]) == AP::kNoError;
        ok = ok && apm->noise_suppression()->Enable(true) == AP::kNoError;
    }
    if (options->gain_control) {
        ok = ok && apm->gain_control()->set_mode(webrtc::GainControl::kAdaptiveDigital) == AP::kNoError;
        ok = ok && apm->gain_control()->set_target_level_dbfs(3) == AP::kNoError;
        ok = ok && apm->gain_control()->set_compression_gain_db(9) == AP::kNoError;
        ok = ok && apm->gain_control()->enable_limiter(true) == AP::kNoError;
        ok = ok && apm->gain_control()->Enable(true) == AP::kNoError;
    }
    ok = ok && apm->high_pass_filter()->Enable(options->high_pass != 0) == AP::kNoError;
    ok = ok && apm->voice_detection()->Enable(options->voice_detection != 0) == AP::kNoError;
    if (!ok) { delete apm; return nullptr; }
    cvoice *voice = new (std::nothrow) cvoice;
    if (!voice) { delete apm; return nullptr; }
    voice->apm = apm;
    voice->rate = sample_rate;
    voice->frames = sample_rate / 100;
    prepare(voice->render, sample_rate, voice->frames);
    prepare(voice->capture, sample_rate, voice->frames);
    return voice;
}

extern "C" void cvoice_destroy(cvoice *voice) {
    if (!voice) return;
    delete voice->apm;
    delete voice;
}

extern "C" int cvoice_chunk_frames(const cvoice *voice) { return voice->frames; }

extern "C" int cvoice_render(cvoice *voice, const int16_t *mono) {
    prepare(voice->render, voice->rate, voice->frames);
    std::memcpy(voice->render.data_, mono, sizeof(int16_t) * voice->frames);
    return voice->apm->ProcessReverseStream(&voice->render);
}

extern "C" int cvoice_capture(cvoice *voice, int16_t *mono, int delay_ms) {
    prepare(voice->capture, voice->rate, voice->frames);
    std::memcpy(voice->capture.data_, mono, sizeof(int16_t) * voice->frames);
    if (voice->apm->echo_cancellation()->is_enabled())
        voice->apm->set_stream_delay_ms(delay_ms < 0 ? 0 : (delay_ms > 500 ? 500 : delay_ms));
    int error = voice->apm->ProcessStream(&voice->capture);
    if (error == webrtc::AudioProcessing::kNoError || error == webrtc::AudioProcessing::kBadStreamParameterWarning)
        std::memcpy(mono, voice->capture.data_, sizeof(int16_t) * voice->frames);
    return error == webrtc::AudioProcessing::kBadStreamParameterWarning ? 0 : error;
}

extern "C" void cvoice_get_stats(cvoice *voice, cvoice_stats *stats) {
    std::memset(stats, 0, sizeof *stats);
    stats->delay_median_ms = -1;
    webrtc::EchoCancellation *aec = voice->apm->echo_cancellation();
    if (aec->is_enabled()) {
        webrtc::EchoCancellation::Metrics metrics;
        if (aec->GetMetrics(&metrics) == webrtc::AudioProcessing::kNoError) {
            stats->has_metrics = 1;
            stats->erle_db = metrics.echo_return_loss_enhancement.average;
            stats->erle_instant_db = metrics.echo_return_loss_enhancement.instant;
            stats->erl_db = metrics.echo_return_loss.average;
        }
        int median = -1, std_ms = -1;
        float poor = 0;
        if (aec->GetDelayMetrics(&median, &std_ms, &poor) == webrtc::AudioProcessing::kNoError) {
            stats->delay_median_ms = median;
            stats->delay_std_ms = std_ms;
            stats->fraction_poor_delays = poor;
        }
        stats->stream_has_echo = aec->stream_has_echo() ? 1 : 0;
    }
    if (voice->apm->voice_detection()->is_enabled())
        stats->stream_has_voice = voice->apm->voice_detection()->stream_has_voice() ? 1 : 0;
}
