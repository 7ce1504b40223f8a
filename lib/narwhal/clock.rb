# frozen_string_literal: true

module Narwhal
  # The one clock for deadlines, timeouts and back-offs: monotonic, so a
  # wall-clock change (NTP, a VM resumed) never fires or delays a timeout.
  module Clock
    def self.now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
