/* attach.c: the API's attach and detach (api.h), and its table of hooks. */
#ifndef TFD_ATTACH_H
#define TFD_ATTACH_H
#include "hooks.h"

/* the hook of that name (hooks.def), or NULL */
const tfd_hook *tfd_hook_named(const char *name) TFD_HIDDEN;

#endif
