# Sourced by md_ab.sh and check_and_bench.sh: same-build MD A/B runs.
#   ab_runs "VAR=V[+VAR=V]:name ..." CASES TIMEOUT DIR
# runs each setting on CASES (bench/md/run_md_bench.sh's atoms:rx:ry:rz:steps:precision list, no PyTorch reference)
# in a process of its own with those variables set, into DIR/name (log DIR/name.log), at most TIMEOUT seconds each;
# reports through the caller's say() the liblammps each run loads (an entry may set LD_LIBRARY_PATH to a saved build)
# and its md_raw.txt line. Needs LMP; stops early where the caller defines ab_time_ok and it fails.
ab_runs() {
  local ab name vars
  for ab in $1; do
    name=${ab#*:}
    [ "$name" != "$ab" ] || { say "skipping '$ab': no ':name'"; continue; }
    if declare -F ab_time_ok > /dev/null && ! ab_time_ok; then say "A/B: no time left for $ab"; break; fi
    IFS=+ read -r -a vars <<<"${ab%%:*}"
    say "$name loads $(env "${vars[@]}" ldd "$LMP" | grep -o "[^ ]*liblammps[^ ]*" | tail -n1)"
    env "${vars[@]}" BATMOBILE_MD_CASES="$2" BATMOBILE_MD_REFERENCE_MAX_ATOMS=0 \
      timeout "$3" bench/md/run_md_bench.sh "$LMP" potentials/water_dft.pt "$4/$name" > "$4/$name.log" 2>&1
    say "A/B ${ab%%:*} ($name): $(tr '\n' ' ' < "$4/$name/md_raw.txt" 2>/dev/null)"
  done
}
