/* The conductor of the recording state (collect.c): it calls each owner's
 * init, after-fork and drain functions, and owns nothing itself but the
 * order they run in. */
#ifndef TFD_COLLECT_H
#define TFD_COLLECT_H
#include "base.h"

#include "public.h"

/* attach: every owner's settings; 0, or -1 with err filled */
int collect_init(const tfd_config *config, char *err, size_t err_len) TFD_HIDDEN;

#endif
