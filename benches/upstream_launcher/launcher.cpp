// Benchmarks only: a model of the per-kernel C++ launcher upstream generates (a CPython extension
// module named __npu_dispatch, one per kernel signature), so `make bench` can time upstream's
// launch path against the same no-op device libraries as ours. Written here, not copied, from
// reading amd/Triton-XDNA:
//   * HSA: amd_triton_npu/backend/hsa_launcher.py (_generate_hsa_launcher) and
//     include/npu_dispatch_common.h at 7c7c41819413e63602fcdeedde831c860b8d6d61; the dispatch
//     goes to ../hsa_runtime.cpp, the model of include/HsaRuntime/HsaRuntime.cpp;
//   * XRT: amd_triton_npu/backend/driver.py (_generate_elf_launcher, the npu2 launcher with a
//     persistent session) at 5ef1c00da1bb6c1fc363545466915fe5fa940500.
//
// A signature is fixed at compile time, as upstream's generated source fixes it:
//   -DMODEL_TENSORS=k   the kernel's pointer arguments (first in the signature)
//   -DMODEL_TRAILING=m  the constexpr arguments after them (parsed with "O", then unused)
//   -DMODEL_HSA or -DMODEL_XRT
// launch(gridX, gridY, gridZ, kernel_metadata, launch_metadata, enter_hook, exit_hook, *args)
// does per call what upstream's does: PyArg_ParseTuple with "iiiOOOO" and one "O" per argument;
// the enter hook when it is not None; for each pointer argument data_ptr() (attribute lookup and
// a call with an empty tuple), then for each its byte size from len(shape) items of shape and
// dtype.itemsize; the dispatch with the GIL released; the exit hook; None.

#include <Python.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#if defined(MODEL_XRT)
#include <mutex>
#include <xrt/experimental/xrt_elf.h>
#include <xrt/experimental/xrt_ext.h>
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_hw_context.h>
#include <xrt/xrt_kernel.h>
#elif defined(MODEL_HSA)
#include "hsa_runtime.h"
#else
#error "define MODEL_HSA or MODEL_XRT"
#endif

#if !defined(MODEL_TENSORS) || MODEL_TENSORS < 1 || !defined(MODEL_TRAILING)
#error "define MODEL_TENSORS (>= 1) and MODEL_TRAILING"
#endif

namespace {

constexpr int TENSORS = MODEL_TENSORS;
constexpr int ARGS = MODEL_TENSORS + MODEL_TRAILING;

// "iiiOOOO" then one "O" per signature argument (pointers and constexprs are both objects).
constexpr std::array<char, 8 + ARGS> parse_format() {
  std::array<char, 8 + ARGS> text{};
  const char head[] = "iiiOOOO";
  for (int i = 0; i < 7; ++i) {
    text[i] = head[i];
  }
  for (int i = 0; i < ARGS; ++i) {
    text[7 + i] = 'O';
  }
  text[7 + ARGS] = '\0';
  return text;
}
constexpr auto FORMAT = parse_format();

struct Launch {
  int grid[3];
  PyObject *kernel_metadata;
  PyObject *launch_metadata;
  PyObject *enter_hook;
  PyObject *exit_hook;
  std::array<PyObject *, ARGS> args;
};

template <std::size_t... I>
bool parse(PyObject *tuple, Launch &l, std::index_sequence<I...>) {
  return PyArg_ParseTuple(tuple, FORMAT.data(), &l.grid[0], &l.grid[1], &l.grid[2],
                          &l.kernel_metadata, &l.launch_metadata, &l.enter_hook, &l.exit_hook,
                          &l.args[I]...) != 0;
}

bool call_hook(PyObject *hook, PyObject *metadata) {
  if (hook == Py_None) {
    return true;
  }
  PyObject *packed = Py_BuildValue("(O)", metadata);
  PyObject *result = PyObject_CallObject(hook, packed);
  Py_DECREF(packed);
  if (result == nullptr) {
    return false;
  }
  Py_DECREF(result);
  return true;
}

// A pointer argument's address: an int as it is, None as null, else what data_ptr() returns.
bool address_of(PyObject *arg, void **out) {
  *out = nullptr;
  if (PyLong_Check(arg)) {
    unsigned long long value = PyLong_AsUnsignedLongLong(arg);
    if (value == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
      return false;
    }
    *out = reinterpret_cast<void *>(value);
    return true;
  }
  if (arg == Py_None) {
    return true;
  }
  PyObject *method = PyObject_GetAttrString(arg, "data_ptr");
  if (method == nullptr) {
    PyErr_SetString(PyExc_TypeError, "a pointer argument must be an int or have data_ptr()");
    return false;
  }
  PyObject *no_args = PyTuple_New(0);
  PyObject *value = PyObject_Call(method, no_args, nullptr);
  Py_DECREF(no_args);
  Py_DECREF(method);
  if (value == nullptr) {
    return false;
  }
  if (!PyLong_Check(value)) {
    Py_DECREF(value);
    PyErr_SetString(PyExc_TypeError, "data_ptr() must return an int");
    return false;
  }
  unsigned long long address = PyLong_AsUnsignedLongLong(value);
  Py_DECREF(value);
  if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    return false;
  }
  *out = reinterpret_cast<void *>(address);
  return true;
}

// The product of obj.shape, read item by item through the sequence protocol; -1 on error.
long element_count(PyObject *arg) {
  PyObject *shape = PyObject_GetAttrString(arg, "shape");
  if (shape == nullptr) {
    return -1;
  }
  if (!PySequence_Check(shape)) {
    Py_DECREF(shape);
    PyErr_SetString(PyExc_TypeError, "shape is not a sequence");
    return -1;
  }
  Py_ssize_t dims = PySequence_Size(shape);
  long count = dims < 0 ? -1 : 1;
  for (Py_ssize_t d = 0; d < dims; ++d) {
    PyObject *item = PySequence_GetItem(shape, d);
    long extent = item == nullptr ? -1 : PyLong_AsLong(item);
    Py_XDECREF(item);
    if (extent == -1 && (item == nullptr || PyErr_Occurred())) {
      count = -1;
      break;
    }
    count *= extent;
  }
  Py_DECREF(shape);
  return count;
}

// obj.dtype.itemsize; -1 on error.
long element_bytes(PyObject *arg) {
  PyObject *dtype = PyObject_GetAttrString(arg, "dtype");
  if (dtype == nullptr) {
    return -1;
  }
  PyObject *itemsize = PyObject_GetAttrString(dtype, "itemsize");
  Py_DECREF(dtype);
  if (itemsize == nullptr) {
    return -1;
  }
  long bytes = PyLong_AsLong(itemsize);
  Py_DECREF(itemsize);
  return bytes == -1 && PyErr_Occurred() ? -1 : bytes;
}

#if defined(MODEL_HSA)

model_hsa_program_t program = nullptr;

PyObject *set_paths(PyObject *, PyObject *args) {
  const char *hsaco = nullptr;
  const char *kernel = nullptr;
  if (!PyArg_ParseTuple(args, "ss", &hsaco, &kernel)) {
    return nullptr;
  }
  char err[512];
  program = model_hsa_prepare(hsaco, kernel, err, sizeof err);
  if (program == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, err);
    return nullptr;
  }
  Py_RETURN_NONE;
}

// Upstream hands the pointers and sizes to the shared runtime with the GIL released.
bool dispatch(const Launch &l, void *const *host, const long *bytes) {
  if (l.grid[0] * l.grid[1] * l.grid[2] <= 0) {
    return true;
  }
  void *pointers[TENSORS];
  uint64_t sizes[TENSORS];
  for (int i = 0; i < TENSORS; ++i) {
    pointers[i] = host[i];
    sizes[i] = static_cast<uint64_t>(bytes[i]);
  }
  char err[512];
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = model_hsa_dispatch(program, TENSORS, pointers, sizes, err, sizeof err);
  Py_END_ALLOW_THREADS;
  if (rc != 0) {
    PyErr_SetString(PyExc_RuntimeError, err);
    return false;
  }
  return true;
}

#else // MODEL_XRT

char elf_path[1024];
char kernel_name[256];

// The module's device state, kept across launches (members in teardown order).
struct Session {
  xrt::device device;
  xrt::elf elf;
  xrt::hw_context context;
  xrt::kernel kernel;
  std::array<xrt::bo, TENSORS> buffers;
  std::array<long, TENSORS> capacity;
  bool ready = false;
  Session() { capacity.fill(-1); }
};

Session &session() {
  static Session s;
  return s;
}

std::mutex &session_lock() {
  static std::mutex m;
  return m;
}

PyObject *set_paths(PyObject *, PyObject *args) {
  const char *elf = nullptr;
  const char *kernel = nullptr;
  if (!PyArg_ParseTuple(args, "ss", &elf, &kernel)) {
    return nullptr;
  }
  std::lock_guard<std::mutex> hold(session_lock());
  std::strncpy(elf_path, elf, sizeof elf_path - 1);
  std::strncpy(kernel_name, kernel, sizeof kernel_name - 1);
  Py_RETURN_NONE;
}

// Upstream's _launch, run with the GIL released: make the session once; grow a buffer that is
// too small; map and copy every tensor in, sync each to the device; a new run with each buffer
// set, start, wait2; sync the last tensor back and copy it out.
void run_on_device(std::string &error, const int *grid, void *const *host, const long *bytes) {
  std::lock_guard<std::mutex> hold(session_lock());
  if (grid[0] * grid[1] * grid[2] <= 0) {
    return;
  }
  try {
    Session &s = session();
    if (!s.ready) {
      if (!s.device) {
        s.device = xrt::device(0u);
      }
      s.elf = xrt::elf{std::string(elf_path)};
      s.context = xrt::hw_context(s.device, s.elf);
      s.kernel = xrt::ext::kernel(s.context, std::string(kernel_name));
      s.ready = true;
    }
    for (int i = 0; i < TENSORS; ++i) {
      if (s.capacity[i] < bytes[i]) {
        s.buffers[i] = xrt::ext::bo{s.device, static_cast<size_t>(bytes[i])};
        s.capacity[i] = bytes[i];
      }
    }
    void *mapped[TENSORS];
    for (int i = 0; i < TENSORS; ++i) {
      mapped[i] = s.buffers[i].map<void *>();
      std::memcpy(mapped[i], host[i], static_cast<size_t>(bytes[i]));
    }
    for (int i = 0; i < TENSORS; ++i) {
      s.buffers[i].sync(XCL_BO_SYNC_BO_TO_DEVICE);
    }
    auto run = xrt::run(s.kernel);
    for (int i = 0; i < TENSORS; ++i) {
      run.set_arg(i, s.buffers[i]);
    }
    run.start();
    run.wait2();
    const int last = TENSORS - 1;
    s.buffers[last].sync(XCL_BO_SYNC_BO_FROM_DEVICE);
    std::memcpy(host[last], mapped[last], static_cast<size_t>(bytes[last]));
  } catch (const std::exception &e) {
    error = std::string("XRT runtime error: ") + e.what();
  }
}

bool dispatch(const Launch &l, void *const *host, const long *bytes) {
  std::string error;
  Py_BEGIN_ALLOW_THREADS;
  run_on_device(error, l.grid, host, bytes);
  Py_END_ALLOW_THREADS;
  if (!error.empty()) {
    PyErr_SetString(PyExc_RuntimeError, error.c_str());
    return false;
  }
  return true;
}

#endif

PyObject *launch(PyObject *, PyObject *args) {
  Launch l{};
  if (!parse(args, l, std::make_index_sequence<ARGS>{})) {
    return nullptr;
  }
  if (!call_hook(l.enter_hook, l.launch_metadata)) {
    return nullptr;
  }
  void *host[TENSORS];
  for (int i = 0; i < TENSORS; ++i) {
    if (!address_of(l.args[i], &host[i])) {
      return nullptr;
    }
  }
  long bytes[TENSORS];
  for (int i = 0; i < TENSORS; ++i) {
    long count = element_count(l.args[i]);
    long each = element_bytes(l.args[i]);
    if (count == -1 || each == -1) {
      return nullptr;
    }
    bytes[i] = count * each;
  }
  if (!dispatch(l, host, bytes)) {
    return nullptr;
  }
  if (PyErr_Occurred()) {
    return nullptr;
  }
  if (!call_hook(l.exit_hook, l.launch_metadata)) {
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"launch", launch, METH_VARARGS, "launch one kernel of this signature"},
    {"set_paths", set_paths, METH_VARARGS, "the kernel's artifact and name"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "__npu_dispatch", nullptr, -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

} // namespace

PyMODINIT_FUNC PyInit___npu_dispatch(void) { return PyModule_Create(&module); }
