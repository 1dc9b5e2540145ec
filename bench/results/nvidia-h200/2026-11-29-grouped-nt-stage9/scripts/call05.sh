# notebooks re-executed (kernels changed: stage 9's grouped form)
source .gpu/setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlnb/*.whl
R=/tmp/r05; rm -rf $R; mkdir -p $R/nb
T0=$(date +%s)
for f in notebooks/0*.py; do n=$(basename $f .py | cut -c1-2); (timeout 250 python3 notebooks/execute.py $n --timeout 240 > $R/nb/$n.log 2>&1; echo "$n rc=$?" >> $R/nb/rc.txt) & done; wait
cp notebooks/*.ipynb $R/nb/
(cd /tmp && tar czf $OUT/nb.tgz r05/nb)
echo "notebooks $(( $(date +%s) - T0 )) s"; sort $R/nb/rc.txt | tr '\n' ' '; echo
