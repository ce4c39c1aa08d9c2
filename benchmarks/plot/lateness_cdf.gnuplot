# Lateness CDFs (written by heartbeat_scenario --cdf and precision_bench --cdf: blocks of
# "lateness_ms fraction"):
# left, the heartbeat scenario's pings and drops (block 0 asio-wheel, block 1 steady_timer,
# block 2, if present, heartbeat_group);
# right, the precision check, one block per name in `blocks`, with its bound `limit` (ms).
#
# gnuplot -e "scenario='benchmarks/results/heartbeat_scenario.cdf.dat'" \
#         -e "precision='benchmarks/results/precision.cdf.dat'" \
#         -e "blocks='steady_timer wheel_timer idle_timer heartbeat'" -e "limit=2" \
#         -e "outfile='benchmarks/results/lateness_cdf.png'" benchmarks/plot/lateness_cdf.gnuplot
# Optional x ranges: sx0, sx1 (scenario), px0, px1 (precision).

if (!exists("scenario")) scenario = "benchmarks/results/heartbeat_scenario.cdf.dat"
if (!exists("precision")) precision = "benchmarks/results/precision.cdf.dat"
if (!exists("blocks")) blocks = "steady_timer wheel_timer idle_timer heartbeat"
if (!exists("outfile")) outfile = "benchmarks/results/lateness_cdf.png"

set terminal pngcairo size 1200, 480 noenhanced font "sans,10"
set output outfile
set multiplot layout 1, 2 title "Lateness at handler entry against the due time (left of the grey line: early)" font "sans,12"

set grid xtics ytics lc rgb "#dddddd"
set key bottom right box opaque
set ylabel "fraction of completions"
set xlabel "lateness (ms)"
set yrange [0:1.02]
set ytics 0.1

set title "Heartbeat scenario: pings and drops"
if (exists("sx0") && exists("sx1")) { set xrange [sx0:sx1] } else { set autoscale x }
set arrow 1 from 0, graph 0 to 0, graph 1 nohead lc rgb "#999999" lw 1 dt 3 back
# Results from before heartbeat_group have two blocks.
stats scenario using 1 nooutput
if (STATS_blocks > 2) {
  plot scenario index 0 using 1:2 with lines lw 2 lc rgb "#2471a3" title "asio-wheel (heartbeat)", \
       scenario index 1 using 1:2 with lines lw 2 lc rgb "#c0392b" title "asio::steady_timer", \
       scenario index 2 using 1:2 with lines lw 2 lc rgb "#27ae60" title "asio-wheel (heartbeat_group)"
} else {
  plot scenario index 0 using 1:2 with lines lw 2 lc rgb "#2471a3" title "asio-wheel (heartbeat)", \
       scenario index 1 using 1:2 with lines lw 2 lc rgb "#c0392b" title "asio::steady_timer"
}

set title "Precision check (default tick)"
if (exists("px0") && exists("px1")) { set xrange [px0:px1] } else { set autoscale x }
if (exists("limit")) {
  set arrow 2 from limit, graph 0 to limit, graph 1 nohead lc rgb "#000000" dt 2 lw 1
  set label 2 "bound" at limit, graph 0.5 offset 0.5, 0
}
colors = "#c0392b #2471a3 #27ae60 #8e44ad #d68910"
plot for [i = 1:words(blocks)] precision index (i - 1) using 1:2 with lines lw 2 \
     lc rgb word(colors, i) title word(blocks, i)
unset multiplot
