# Lateness against due time across the wheel's cascades (tail_latency_bench --trace: per
# 5 ms of due time, the worst lateness; blocks in the order spread/steady, spread/wheel,
# burst/steady, burst/wheel, for the run's largest N).
#
#   gnuplot -e "after='benchmarks/results/tail_latency.trace.dat'" \
#           -e "before='before.trace.dat'" \
#           -e "outfile='benchmarks/results/tail_latency.png'" benchmarks/plot/tail_latency.gnuplot
#
# `before`: optional, the same program built on the commit before the change (its wheel
# blocks are drawn too). `core=1`: traces of --core (blocks spread, burst; the CPU time of
# each tick's turns against its tick: the wheel's own stall, whatever the machine's load).

if (!exists("after")) after = "benchmarks/results/tail_latency.trace.dat"
if (!exists("outfile")) outfile = "benchmarks/results/tail_latency.png"

set terminal pngcairo size 1200, 520 noenhanced font "sans,10"
set output outfile
if (exists("core")) {
  set multiplot layout 1, 2 title "The wheel alone, 1e6 timers armed at once: CPU time of each tick's turns (log scale)" font "sans,12"
} else {
  set multiplot layout 1, 2 title "Worst lateness per 5 ms of due time, timers armed at once (log scale)" font "sans,12"
}
set grid xtics ytics lc rgb "#dddddd"
set key top right box opaque
set xlabel "due time after arming (s)"
set ylabel "lateness (ms)"
set logscale y
set yrange [0.01:100]

if (exists("core")) {
  set ylabel "CPU time of the tick's turns (ms)"
  set yrange [0.001:100]
  do for [k = 0:1] {
    set title (k == 0 ? "core, spread: due over [5 s, 13 s]" : "core, burst: due over [5 s, 6 s]")
    set xrange [5:(k == 0 ? 13 : 6)]
    if (exists("before")) {
      plot before index k using 1:2 with points pt 7 ps 0.3 lc rgb "#d62728" title "before", \
           after index k using 1:2 with points pt 7 ps 0.3 lc rgb "#1f77b4" title "after"
    } else {
      plot after index k using 1:2 with points pt 7 ps 0.3 lc rgb "#1f77b4" title "wheel"
    }
  }
  unset multiplot
  exit
}

set title "spread: due over [5 s, 13 s]"
set xrange [5:13]
if (exists("before")) {
  plot before index 1 using 1:2 with lines lw 1 lc rgb "#d62728" title "wheel_timer, before", \
       after index 1 using 1:2 with lines lw 1 lc rgb "#1f77b4" title "wheel_timer, after", \
       after index 0 using 1:2 with lines lw 1 lc rgb "#7f7f7f" title "asio::steady_timer"
} else {
  plot after index 1 using 1:2 with lines lw 1 lc rgb "#1f77b4" title "wheel_timer", \
       after index 0 using 1:2 with lines lw 1 lc rgb "#7f7f7f" title "asio::steady_timer"
}

set title "burst: due over [5 s, 6 s]"
set xrange [5:6]
if (exists("before")) {
  plot before index 3 using 1:2 with lines lw 1 lc rgb "#d62728" title "wheel_timer, before", \
       after index 3 using 1:2 with lines lw 1 lc rgb "#1f77b4" title "wheel_timer, after", \
       after index 2 using 1:2 with lines lw 1 lc rgb "#7f7f7f" title "asio::steady_timer"
} else {
  plot after index 3 using 1:2 with lines lw 1 lc rgb "#1f77b4" title "wheel_timer", \
       after index 2 using 1:2 with lines lw 1 lc rgb "#7f7f7f" title "asio::steady_timer"
}
unset multiplot
