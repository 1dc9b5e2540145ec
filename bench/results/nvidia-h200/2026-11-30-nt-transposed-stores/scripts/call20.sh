# swizzled transposed tiles: old (HEAD) / new (working tree) / old / new, each from its own folder
source .gpu/setup.sh
R=/tmp/r20; rm -rf $R; mkdir -p $R
T0=$(date +%s)
for run in old1 new1 old2 new2; do
  case $run in old*) D=.gpu/oldtree;; *) D=.gpu/newtree;; esac
  (cd $D && PYTHONPATH=/tmp/site:$PWD timeout 200 python3 ../ntnn2.py $R/$run.jsonl > $R/$run.txt 2> $R/$run.log); echo "$run rc=$? $(( $(date +%s) - T0 )) s"; grep -c "ok$" $R/$run.txt; grep FAIL $R/$run.txt; grep -v check $R/$run.txt
  cp -r $R $OUT/
done
