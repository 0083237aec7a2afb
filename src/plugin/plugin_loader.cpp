// batmobileplugin.so, the file `plugin load` opens: checks that the running LAMMPS is the version the styles were
// compiled for and does not have them compiled in, then opens the styles (batmobile_styles.so beside it) and lets
// them register. The styles use LAMMPS's C++ classes, whose layout and symbols change between versions, so loaded
// into another version they could not even be opened; this file uses only LAMMPS's C library API, which is the same
// in every version.
#include <dlfcn.h>

#include <string>

#include "lammpsplugin.h"
#include "library.h"
#include "version.h"

#ifndef BATMOBILE_LAMMPS_VERSION
#error "BATMOBILE_LAMMPS_VERSION is not set: build the plugin through cmake/lammps_hook.cmake"
#endif

namespace {

const char *const kStylesFile = "batmobile_styles.so";

// Stops LAMMPS with an ERROR line on screen and in the log, through commands only (the C++ Error class of another
// LAMMPS version cannot be called); `print` writes on rank 0, `quit 1` ends every rank.
void stop(void *lmp, std::string message)
{
  for (char &c : message)
    if (c == '"' || c == '$') c = '\'';    // no end of the quoted text, no variable expansion
  lammps_command(lmp, ("print \"\"\"ERROR: " + message + "\"\"\"").c_str());
  lammps_command(lmp, "quit 1");
}

// Whether pair style batmobile is compiled into this LAMMPS: LAMMPS knows it and no loaded plugin provides it (a
// plugin loaded again is LAMMPS's own business: dlopen returns the library already mapped).
bool compiled_in(void *lmp)
{
  if (!lammps_has_style(lmp, "pair", "batmobile")) return false;
  char style[64], name[64];
  for (int i = 0; i < lammps_plugin_count(); ++i)
    if (lammps_plugin_name(i, style, name, sizeof(style)) && std::string(style) == "pair" &&
        std::string(name) == "batmobile")
      return false;
  return true;
}

std::string own_directory()
{
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&stop), &info) == 0 || info.dli_fname == nullptr) return ".";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}    // namespace

extern "C" void lammpsplugin_init(void *lmp, void *handle, void *regfunc)
{
  const int running = lammps_version(lmp);
  if (running != BATMOBILE_LAMMPS_VERSION) {
    stop(lmp, "batmobileplugin.so was built for LAMMPS " LAMMPS_VERSION " (" + std::to_string(BATMOBILE_LAMMPS_VERSION) +
                  "), but this LAMMPS is version " + std::to_string(running) +
                  ": build the plugin against the sources of this LAMMPS (docs/development.md)");
    return;
  }
  // A second copy of the model and its kernels beside the compiled-in one is not supported (in CUDA builds its
  // static initialisation corrupted the heap): the compiled-in styles are the same ones.
  if (compiled_in(lmp)) {
    stop(lmp, "pair style batmobile is compiled into this LAMMPS: use it without plugin load (batmobileplugin.so is "
              "for a LAMMPS built without the Batmobile styles)");
    return;
  }
  const std::string path = own_directory() + "/" + kStylesFile;
  void *styles = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (styles == nullptr) {
    const char *why = dlerror();
    stop(lmp, "batmobileplugin.so cannot open its styles " + path + ": " + (why ? why : "unknown error"));
    return;
  }
  using RegisterFn = void (*)(void *, void *, void *);
  auto register_styles = reinterpret_cast<RegisterFn>(dlsym(styles, "batmobile_register_styles"));
  if (register_styles == nullptr) {
    stop(lmp, path + " has no batmobile_register_styles: it is not the styles library of this plugin");
    return;
  }
  // LAMMPS closes `handle` (this loader) when the last style is unloaded; the styles library stays mapped.
  register_styles(lmp, handle, regfunc);
}
