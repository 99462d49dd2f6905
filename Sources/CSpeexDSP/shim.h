#ifndef CALLEND_CSPEEXDSP_SHIM_H
#define CALLEND_CSPEEXDSP_SHIM_H
/* libspeexdsp's resampler: arbitrary and slowly changing ratios, for playout that follows a
   sound card's clock. */
#include <speex/speex_resampler.h>
#endif
