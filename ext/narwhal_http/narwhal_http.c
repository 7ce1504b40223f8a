/* Entry point of the narwhal_http extension. */
#include "narwhal_http.h"

VALUE nw_mNarwhal;

void Init_narwhal_http(void)
{
  nw_mNarwhal = rb_define_module("Narwhal");
  nw_init_env_keys();
  nw_init_parser();
  nw_init_response();
  nw_init_sendfile();
  nw_init_free_space();
  nw_init_peer_address();
  nw_init_scoreboard();
  nw_init_poller();
  nw_init_access_log();
  nw_init_request_loop();
  nw_init_load_report();
  nw_init_arrival();
  nw_init_backtrace_signal();
  nw_init_stranded();
}
