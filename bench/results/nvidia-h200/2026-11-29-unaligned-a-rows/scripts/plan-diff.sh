# Which held-out products' plans differ between two trees (offline, no GPU: the H200's data).
# usage: plan-diff.sh OLD_TREE NEW_TREE SEED... [models]   (run from anywhere; python with numba)
old=$1 new=$2; shift 2
here=$(dirname "$0")
E="env -u NUMBA_ENABLE_CUDASIM NUMBA_GEMM_BACKEND=numba-cuda"
$E PYTHONPATH=$old python "$here/plans.py" "$@" > /tmp/plans-old.json
$E PYTHONPATH=$new python "$here/plans.py" "$@" > /tmp/plans-new.json
python - <<'P'
import json
a = json.load(open("/tmp/plans-old.json")); b = json.load(open("/tmp/plans-new.json"))
changed = [k for k in a if a[k][:2] != b[k][:2]]
for k in changed:
    print(k, "|", *a[k][:2], f"{a[k][2] * 1e3:.1f}", "->", *b[k][:2], f"{b[k][2] * 1e3:.1f}")
print("changed", len(changed), "of", len(a))
P
