# frozen_string_literal: true

module Narwhal
  class Connection
    # What every connection of a serving process shares. stopping turns
    # true once a graceful stop began: responses then say Connection: close.
    # access_log: the AccessLog (nil: off), for the requests refused here.
    # shedding: a Dispatcher::Shedding (request threads and siblings), or nil.
    Context = Struct.new(:limits, :dispatcher, :logger, :counters, :stopping, :access_log, :shedding)
  end
end
