# Sourced by the bench/md scripts (ROOT: the repository root).
# steps/s of the last run in a LAMMPS log, nan where it has none
steps_per_second() {
  local v
  v=$(grep -oE "[0-9.]+ timesteps/s" "$1" 2>/dev/null | tail -n1 | cut -d' ' -f1)
  echo "${v:-nan}"
}
# The commit a result file names: ROOT/.commit where the caller wrote one (a copied tree whose .git is not the code
# that runs), else git's HEAD
bench_commit() {
  cat "$ROOT/.commit" 2>/dev/null || git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown
}
bench_machine() {
  local m
  m=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
  echo "${m:-host CPU}"
}
