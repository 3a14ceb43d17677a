/* err.c - names of skp_err values. */
#include "skyprof/skp_err.h"

#include <errno.h>

#include "common/err.h"

const char *skp_strerror(skp_err err)
{
    switch (err) {
    case SKP_OK:
        return "ok";
    case SKP_EINVAL:
        return "invalid argument";
    case SKP_ENOMEM:
        return "out of memory";
    case SKP_EIO:
        return "i/o error";
    case SKP_ETIMEDOUT:
        return "deadline exceeded";
    case SKP_EUNAVAILABLE:
        return "unavailable";
    case SKP_EPROTO:
        return "protocol error";
    case SKP_ETOOBIG:
        return "too big";
    case SKP_ENOTFOUND:
        return "not found";
    case SKP_EEXIST:
        return "already exists";
    case SKP_ESTATE:
        return "invalid state";
    case SKP_ENOTSUP:
        return "not supported";
    case SKP_EGRPC:
        return "grpc error status";
    case SKP_EFULL:
        return "queue full";
    }
    return "unknown error";
}

skp_err skpx_err_from_errno(int e)
{
    switch (e) {
    case 0:
        return SKP_OK;
    case ENOMEM:
        return SKP_ENOMEM;
    case EINVAL:
        return SKP_EINVAL;
    case ETIMEDOUT:
        return SKP_ETIMEDOUT;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ENOTCONN:
        return SKP_EUNAVAILABLE;
    case ENOENT:
        return SKP_ENOTFOUND;
    case EEXIST:
        return SKP_EEXIST;
    case EMSGSIZE:
        return SKP_ETOOBIG;
    default:
        return SKP_EIO;
    }
}
