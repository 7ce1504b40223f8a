# frozen_string_literal: true

module Narwhal
  # Where a complete request runs: on the thread that read it, always. The
  # reading side (Connection) hands each complete Request to #dispatch and
  # is told what became of the connection (Next: KEEP, CLOSE or RELEASE).
  module Dispatcher
    autoload :AcceptGate, "narwhal/dispatcher/accept_gate"
    autoload :ForkGuard, "narwhal/dispatcher/fork_guard"
    autoload :HandOff, "narwhal/dispatcher/hand_off"
    autoload :Inline, "narwhal/dispatcher/inline"
    autoload :Shedding, "narwhal/dispatcher/shedding"
    autoload :Threaded, "narwhal/dispatcher/threaded"
  end
end
