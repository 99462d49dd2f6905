#ifndef CALLEND_CYUV_SHIM_H
#define CALLEND_CYUV_SHIM_H
#include <libyuv/convert.h>
#include <libyuv/convert_from.h>
#include <libyuv/scale.h>
#include <libyuv/compare.h>
#include <libyuv/planar_functions.h>
#endif
