/* Opens a library in a new link-map namespace with dlmopen, through this
 * library's GOT (so the shim's dlmopen wrapper sees the call). */
#define _GNU_SOURCE
#include <dlfcn.h>

void *ns_open(const char *path)
{
    return dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
}

void *ns_sym(void *handle, const char *name)
{
    return dlsym(handle, name);
}

int ns_close(void *handle)
{
    return dlclose(handle);
}
