# frozen_string_literal: true

module Narwhal
  # The start-up lines written for a person rather than a parser: each
  # listener as a URL a browser or curl takes as it is, and, when the log
  # is a terminal, how to stop. (The `listening on addr=... fd=...` line
  # beside it stays for scripts.)
  module ListenBanner
    # address: a Listener#address ("127.0.0.1:8080", "[::1]:8080", "/path")
    def self.url(address)
      address.start_with?("/") ? "unix:#{address}" : "http://#{address}"
    end

    def self.listening(logger, listener)
      logger.info("Listening on #{url(listener.address)}")
    end

    def self.how_to_stop(logger, stderr = $stderr)
      logger.info("Ctrl-C to stop") if stderr.tty?
    end
  end
end
