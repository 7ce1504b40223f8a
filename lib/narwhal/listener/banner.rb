# frozen_string_literal: true

module Narwhal
  class Listener
    # The start-up lines: one per listener, with Unicorn's fields for scripts
    # (`listening on addr=... fd=...`) and, for TCP, a URL a browser or curl
    # takes as it is; and, when Ctrl-C would stop the server, that it does.
    module Banner
      # verb: "listening on" (bound here) or "inherited" (from a parent)
      def self.log(logger, verb, listener)
        logger.info("#{verb} addr=#{listener.address} fd=#{listener.io.fileno}#{url_field(listener.address)}")
      end

      # address: a Listener#address ("127.0.0.1:8080", "[::1]:8080", "/path");
      # a Unix socket's path is all there is to say of it.
      def self.url_field(address)
        address.start_with?("/") ? "" : " url=http://#{address}"
      end

      def self.how_to_stop(logger, stat: "/proc/self/stat")
        logger.info("Ctrl-C to stop") if foreground?(stat)
      end

      # Ctrl-C signals the foreground process group of a terminal: ours when
      # /proc's stat says tpgid (that group) is our pgrp. Where the log goes
      # does not matter; a daemon, a service or a test's own group has none.
      def self.foreground?(stat)
        # after the command name, which may hold ") " itself
        state_on = File.read(stat).rpartition(") ").last.split # state ppid pgrp session tty_nr tpgid ...
        pgrp = state_on[2].to_i
        tpgid = state_on[5].to_i
        tpgid.positive? && tpgid == pgrp
      rescue SystemCallError
        false
      end
    end
  end
end
