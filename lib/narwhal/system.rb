# frozen_string_literal: true

module Narwhal
  module System
    autoload :Cgroup, "narwhal/system/cgroup"
    autoload :ListenQueue, "narwhal/system/listen_queue"
    autoload :LogReopener, "narwhal/system/log_reopener"
    autoload :ProcessMemory, "narwhal/system/process_memory"
    autoload :SignalQueue, "narwhal/system/signal_queue"
    autoload :SocketOwner, "narwhal/system/socket_owner"
    autoload :UnlinkedTempfile, "narwhal/system/unlinked_tempfile"
  end
end
