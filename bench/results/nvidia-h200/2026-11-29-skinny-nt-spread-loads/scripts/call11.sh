# host time a call at 1 x 336 x 1035 NT: this tree from the repository root, the tree before from
# its folder, this tree from /tmp
source .gpu/setup.sh
R=/tmp/r11; rm -rf $R; mkdir -p $R
H=$PWD/.gpu/host.py
timeout 60 python3 $H new-root prof > $R/new-root.txt 2>&1; head -1 $R/new-root.txt
(cd .gpu/oldtree && PYTHONPATH=/tmp/site:$PWD timeout 60 python3 $H old-own prof > $R/old-own.txt 2>&1; head -1 $R/old-own.txt)
(cd /tmp && timeout 60 python3 $H new-tmp > $R/new-tmp.txt 2>&1; head -1 $R/new-tmp.txt)
(cd /tmp && PYTHONPATH=/tmp/site:$OLDPWD/.gpu/oldtree timeout 60 python3 $H old-tmp > $R/old-tmp.txt 2>&1; head -1 $R/old-tmp.txt)
timeout 60 python3 $H new-root2 > $R/new-root2.txt 2>&1; head -1 $R/new-root2.txt
(cd /tmp && tar czf $OUT/r11.tgz r11)
