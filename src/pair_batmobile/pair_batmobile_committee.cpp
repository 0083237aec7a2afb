// Committee output of pair_style batmobile: keywords, reduction over ranks, the model-deviation file. See
// pair_batmobile_committee.h.
#include "pair_batmobile_committee.h"

#include <sys/stat.h>

#include <cstring>

#include "atom.h"
#include "comm.h"
#include "error.h"
#include "fmt/format.h"
#include "utils.h"

using namespace LAMMPS_NS;

BatmobileCommittee::~BatmobileCommittee()
{
  if (fp_) fclose(fp_);
}

int BatmobileCommittee::settings_keyword(int narg, char **arg, const char *style)
{
  const bool freq = strcmp(arg[0], "out_freq") == 0, file = strcmp(arg[0], "out_file") == 0;
  if (!freq && !file) return 0;
  if (narg < 2) error->all(FLERR, "pair_style {}: '{}' needs a value", style, arg[0]);
  if (freq) {
    out_freq_ = utils::inumeric(FLERR, arg[1], false, lmp);
    if (out_freq_ <= 0)
      error->all(FLERR, "pair_style {}: out_freq must be a positive number of steps, got {}", style, arg[1]);
  } else {
    out_file_ = arg[1];
    if (fp_) {
      fclose(fp_);
      fp_ = nullptr;
    }
    check_file(false);
  }
  return 2;
}

void BatmobileCommittee::reset_settings(const char *style)
{
  style_ = style;
  out_freq_ = 100;
  if (out_file_ != "model_devi.out" && fp_) {
    fclose(fp_);
    fp_ = nullptr;
  }
  out_file_ = "model_devi.out";
}

std::string BatmobileCommittee::settings_line() const
{
  if (!active()) return "";
  return fmt::format(", committee of {} models (model deviation every {} steps to {})", members(), out_freq_,
                     out_file_);
}

void BatmobileCommittee::init(const char *style)
{
  style_ = style;
  if (active()) check_file(true);
}

void BatmobileCommittee::check_file(bool open)
{
  // rank 0 writes the file: it decides, and every rank stops with the same message
  std::string problem;
  if (comm->me == 0 && !fp_) {
    const size_t slash = out_file_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : out_file_.substr(0, slash);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0)
      problem = fmt::format("out_file '{}': its directory '{}' does not exist ({}); create it first", out_file_, dir,
                            utils::getsyserror());
    else if (!S_ISDIR(st.st_mode))
      problem = fmt::format("out_file '{}': '{}' is not a directory", out_file_, dir);
    else if (open && !try_open())
      problem = fmt::format("out_file '{}': cannot open the model-deviation file for writing: {}", out_file_,
                            utils::getsyserror());
  }
  int length = static_cast<int>(problem.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, world);
  if (length == 0) return;
  problem.resize(length);
  MPI_Bcast(&problem[0], length, MPI_CHAR, 0, world);
  error->all(FLERR, "pair_style {}: {}", style_, problem);
}

void BatmobileCommittee::open_file()
{
  if (fp_ || comm->me != 0) return;
  // (init() has opened it already; this is for a file closed since, by a later out_file keyword)
  if (!try_open())
    error->one(FLERR, "pair_style {}: cannot open the model-deviation file '{}': {}", style_, out_file_,
               utils::getsyserror());
}

bool BatmobileCommittee::try_open()
{
  fp_ = fopen(out_file_.c_str(), "w");
  if (!fp_) return false;
  fmt::print(fp_, "#{:>11} {:>18} {:>18} {:>18} {:>18} {:>18} {:>18}\n", "step", "max_devi_v", "min_devi_v",
             "avg_devi_v", "max_devi_f", "min_devi_f", "avg_devi_f");
  return true;
}

double *BatmobileCommittee::per_atom_property()
{
  int flag = -1, cols = -1;
  const int index = atom->find_custom("batmobile_devi_f", flag, cols);
  if (index < 0) return nullptr;
  if (flag != 1 || cols != 0)
    error->all(FLERR, "pair_style {}: the per-atom property batmobile_devi_f must be a floating-point vector: "
               "fix ID all property/atom d_batmobile_devi_f", style_);
  return atom->dvector[index];
}

void BatmobileCommittee::write_step(bigint step, const std::vector<double> &forces, const std::vector<double> &virials,
                                    const std::vector<char> &model_atom, int nlocal)
{
  const int K = members();
  double *per_atom = per_atom_property();
  batmobile::DeviationStats f_local;
  for (int i = 0; i < nlocal; ++i) {
    if (!model_atom[i]) {
      if (per_atom) per_atom[i] = 0.0;
      continue;
    }
    const double eps = batmobile::atom_force_deviation(forces.data() + (size_t) i * K * 3, K);
    f_local.add(eps);
    if (per_atom) per_atom[i] = eps;
  }
  batmobile::DeviationStats f_all;
  MPI_Allreduce(&f_local.max, &f_all.max, 1, MPI_DOUBLE, MPI_MAX, world);
  MPI_Allreduce(&f_local.min, &f_all.min, 1, MPI_DOUBLE, MPI_MIN, world);
  const double local_sums[2] = {f_local.sum, f_local.count};
  double sums[2] = {0.0, 0.0};
  MPI_Allreduce(local_sums, sums, 2, MPI_DOUBLE, MPI_SUM, world);
  f_all.sum = sums[0];
  f_all.count = sums[1];
  std::vector<double> vir_all(virials.size(), 0.0);
  MPI_Allreduce(virials.data(), vir_all.data(), static_cast<int>(virials.size()), MPI_DOUBLE, MPI_SUM, world);
  if (comm->me != 0 || f_all.count == 0) return;
  const batmobile::DeviationStats v = batmobile::virial_deviation(vir_all.data(), K, f_all.count);
  open_file();
  fmt::print(fp_, "{:>12} {:>18.6e} {:>18.6e} {:>18.6e} {:>18.6e} {:>18.6e} {:>18.6e}\n", step, v.max, v.min,
             v.mean(), f_all.max, f_all.min, f_all.mean());
  fflush(fp_);
}
