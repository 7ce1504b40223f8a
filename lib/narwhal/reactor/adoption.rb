# frozen_string_literal: true

module Narwhal
  class Reactor
    # New connections joining the reactor: accepted in Ruby (#adopt, its
    # first request served on the accepting thread) or by the C loop with
    # their first requests served (#adopt_served).
    module Adoption
      # A socket accepted from a listener: its first bytes read (and request
      # served) on this thread, registered once it waits; or, with serve
      # false, registered for the loop to serve when epoll reports it. False
      # when it is closed already (epoll refused it, or its first request was
      # its last).
      def adopt(handler, fd, serve: true)
        register(handler, fd)
        if !serve
          @poller.add(fd, @handler_events)
          @writing[fd] = false
        elsif @threaded
          @poller.reserve(fd) # this thread's until it first arms it
        end
        # served here: it joins the set when it first waits (#wait_for), so
        # a connection closed after its first request never does
        dispatch(handler, fd) if serve
        @handlers.key?(handler) # false: closed (maybe refused by epoll) after its first request
      rescue Errno::ENOMEM, Errno::ENOSPC => e
        refused(handler, fd, e)
        false
      end

      # A socket the RequestLoop accepted and served its first requests on:
      # action is what the handler is to do next (KEEP, WRITE, CLOSE,
      # RELEASE). False when it is closed already.
      def adopt_served(handler, fd, action)
        register(handler, fd)
        @poller.reserve(fd) if @threaded
        apply(handler, fd, action)
        @handlers.key?(handler)
      end

      private

      # epoll would not take the handler's socket: it is closed, and
      # accepting backs off (descriptors or kernel memory are short).
      def refused(handler, fd, error)
        let_go(handler, fd)
        handler.close
        @acceptors.back_off(error)
      end
    end
  end
end
