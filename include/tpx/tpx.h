/* tpx: point-to-point transfers of host (and GPU) memory over TCP-family NCCL
 * net plugins. Umbrella header: include this one. docs/API.md walks through it. */
#ifndef TPX_TPX_H
#define TPX_TPX_H

#include "tpx/config.h"
#include "tpx/endpoint.h"
#include "tpx/error.h"
#include "tpx/mem.h"
#include "tpx/rendezvous.h"
#include "tpx/version.h"
#include "tpx/xfer.h"

#endif
