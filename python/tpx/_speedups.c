/* Optional compiled fast path for the two calls a synchronous loop makes per
 * transfer (tpx_xfer_run, tpx_wait_notif): one C call from Python each,
 * instead of ctypes' argument conversion. The library itself is still
 * loaded by ctypes (tpx/_lib.py), which hands the function addresses to
 * bind(), so this module links against nothing but Python. Built by
 * `pip install` when a compiler and Python's headers are there (the build backend,
 * optional) and by CMake for the tests; without it the package uses ctypes
 * for these calls too (docs/notes/python-vs-c.md compares both). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "tpx/endpoint.h"

typedef int (*run_fn)(void *x, int timeout_ms);
typedef int (*wait_notif_fn)(void *ep, int timeout_ms, tpx_notif_t *out);

static run_fn run_p;
static wait_notif_fn wait_notif_p;

/* bind(address of tpx_xfer_run, address of tpx_wait_notif) */
static PyObject *bind(PyObject *self, PyObject *args) {
  unsigned long long run, wn;
  (void)self;
  if (!PyArg_ParseTuple(args, "KK", &run, &wn)) return NULL;
  run_p = (run_fn)(uintptr_t)run;
  wait_notif_p = (wait_notif_fn)(uintptr_t)wn;
  Py_RETURN_NONE;
}

static int handle_ms(PyObject *const *args, Py_ssize_t n, void **h, int *ms) {
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "expected (handle, timeout_ms)");
    return -1;
  }
  *h = PyLong_AsVoidPtr(args[0]);
  *ms = (int)PyLong_AsLong(args[1]);
  return PyErr_Occurred() ? -1 : 0;
}

/* run(transfer handle, timeout_ms) -> rc, the GIL released meanwhile. */
static PyObject *run(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  void *h;
  int ms, rc;
  (void)self;
  if (handle_ms(args, n, &h, &ms)) return NULL;
  Py_BEGIN_ALLOW_THREADS
  rc = run_p(h, ms);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(rc);
}

/* wait_notif(endpoint handle, timeout_ms) -> (msg, peer handle, peer name)
 * or the rc (0: none in time, < 0: error). */
static PyObject *wait_notif(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  void *h;
  int ms, rc;
  tpx_notif_t nt;
  (void)self;
  if (handle_ms(args, n, &h, &ms)) return NULL;
  Py_BEGIN_ALLOW_THREADS
  rc = wait_notif_p(h, ms, &nt);
  Py_END_ALLOW_THREADS
  if (rc != 1) return PyLong_FromLong(rc);
  size_t len = nt.len <= TPX_NOTIF_MAX ? nt.len : TPX_NOTIF_MAX;
  return Py_BuildValue("(y#Ky#)", (const char *)nt.msg, (Py_ssize_t)len, (unsigned long long)(uintptr_t)nt.peer,
                       nt.peer_name, (Py_ssize_t)strnlen(nt.peer_name, TPX_NAME_MAX));
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(run_address, wait_notif_address)"},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL, "run(xfer, timeout_ms) -> rc"},
    {"wait_notif", (PyCFunction)(void (*)(void))wait_notif, METH_FASTCALL,
     "wait_notif(ep, timeout_ms) -> (msg, peer, name) | rc"},
    {NULL, NULL, 0, NULL},
};

/* pip builds it inside the package (tpx._speedups); CMake builds it for the
 * tests as a top-level module next to the build (_tpx_speedups), since the
 * package itself is used from the source tree there. */
#ifdef TPX_SPEEDUPS_TOPLEVEL
#define MODNAME "_tpx_speedups"
#define MODINIT PyInit__tpx_speedups
#else
#define MODNAME "_speedups"
#define MODINIT PyInit__speedups
#endif

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, MODNAME, NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC MODINIT(void) { return PyModule_Create(&module); }
