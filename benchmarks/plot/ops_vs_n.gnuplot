# Cost per operation against the number of pending timers N, asio::steady_timer against
# asio_wheel::wheel_timer, one panel per operation (from wheel_timer_bench's JSON, turned into
# <datadir>/wheel_timer_bench_<op>.dat by scripts/bench: columns N, steady, wheel).
#
# gnuplot -e "datadir='benchmarks/results'" -e "ops='arm cancel reset fire bytes'" \
#         -e "outfile='benchmarks/results/ops_vs_n.png'" benchmarks/plot/ops_vs_n.gnuplot

if (!exists("datadir")) datadir = "benchmarks/results"
if (!exists("ops")) ops = "arm cancel reset fire"
if (!exists("outfile")) outfile = datadir."/ops_vs_n.png"

n = words(ops)
cols = (n > 4) ? 3 : 2
rows = int(ceil(n * 1.0 / cols))

set terminal pngcairo size 420 * cols, 330 * rows noenhanced font "sans,10"
set output outfile
set multiplot layout rows, cols title "Cost per operation against N pending timers (median; lower is better)" font "sans,12"

set logscale x 10
set format x "1e%T"
set xlabel "N pending timers"
set grid xtics ytics lc rgb "#dddddd"
set key top left box opaque
set yrange [0:*]
set offsets graph 0.05, graph 0.05, graph 0.15, 0

describe(op) = op eq "arm" ? "arm: expires_after + async_wait" : \
               op eq "cancel" ? "cancel: cancel() + aborted handler" : \
               op eq "cancel_warm" ? "cancel, timer object in cache" : \
               op eq "reset" ? "reset: re-arm a pending wait" : \
               op eq "reset_warm" ? "reset, timer object in cache" : \
               op eq "fire" ? "fire: CPU per completed handler" : \
               op eq "bytes" ? "memory per pending timer" : op

do for [i = 1:n] {
  op = word(ops, i)
  set title describe(op)
  set ylabel (op eq "bytes") ? "bytes" : "ns per operation"
  file = datadir."/wheel_timer_bench_".op.".dat"
  plot file using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb "#c0392b" title "asio::steady_timer", \
       file using 1:3 with linespoints lw 2 pt 5 ps 0.8 lc rgb "#2471a3" title "asio_wheel::wheel_timer"
}
unset multiplot
