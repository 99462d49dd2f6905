#ifndef CALLEND_CALSA_SHIM_H
#define CALLEND_CALSA_SHIM_H
#include <alsa/asoundlib.h>
#endif
