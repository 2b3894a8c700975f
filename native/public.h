/* The shim's interface to Python (api.h, which cffi also reads as its
 * cdef and so can hold no include guard), included once. */
#ifndef TFD_PUBLIC_H
#define TFD_PUBLIC_H
#include "base.h"

#include "api.h"

#endif
