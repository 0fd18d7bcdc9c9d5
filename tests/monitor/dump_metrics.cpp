// Prints the monitor's Prometheus text for this machine (GPU families of query_gpus() and a
// counter), for check_metrics.py to parse with prometheus_client.
#include <cstdio>

#include "runtime/monitor/host_monitor.h"
#include "runtime/monitor/prometheus.h"

int main() {
  using namespace tandem::monitor;
  PrometheusWriter w;
  w.family("tandem_monitor_queries_total", "counter", "GPU queries made by this dump.");
  w.sample("tandem_monitor_queries_total", {}, 1);
  write_gpu_metrics(w, query_gpus(), query_host().hostname, {{"rank", "0"}});
  std::fputs(w.str().c_str(), stdout);
  return 0;
}
