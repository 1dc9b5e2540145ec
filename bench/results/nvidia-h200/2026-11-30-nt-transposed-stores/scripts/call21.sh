# paired transposed movers: old (HEAD) / new (working tree) / old / new, each from its own folder;
# then the notebooks on the working tree
source .gpu/setup.sh
R=/tmp/r21; rm -rf $R; mkdir -p $R/nb
T0=$(date +%s)
for run in old1 new1 old2 new2; do
  case $run in old*) D=.gpu/oldtree;; *) D=.gpu/newtree;; esac
  (cd $D && PYTHONPATH=/tmp/site:$PWD timeout 150 python3 ../ntnn2.py $R/$run.jsonl > $R/$run.txt 2> $R/$run.log); echo "$run rc=$? $(( $(date +%s) - T0 )) s"; grep -c "ok$" $R/$run.txt; grep FAIL $R/$run.txt; grep -v check $R/$run.txt; grep precompile $R/$run.log | tail -2
  cp -r $R $OUT/
done
grep -q FAIL $R/new*.txt && exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlnb/*.whl
for f in notebooks/0*.py; do n=$(basename $f .py | cut -c1-2); (timeout 250 python3 notebooks/execute.py $n --timeout 240 > $R/nb/$n.log 2>&1; echo "$n rc=$?" >> $R/nb/rc.txt) & done; wait
cp notebooks/*.ipynb $R/nb/
(cd /tmp && tar czf $OUT/nb.tgz r21/nb)
echo "notebooks $(( $(date +%s) - T0 )) s"; sort $R/nb/rc.txt | tr '\n' ' '; echo
