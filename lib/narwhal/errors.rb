# frozen_string_literal: true

module Narwhal
  # The exceptions that apps, hooks and config files see, by these names.
  # (HttpParserError, a request the parser refused, is the extension's.)

  # A bad configuration; the message names the file and line.
  class ConfigError < StandardError; end

  # The client went away (or stopped taking data) while we sent a response.
  # An IOError, so that apps rescuing IOError around stream writes still see
  # it; the server tells it apart from the app's own I/O errors.
  class ClientGone < IOError; end

  # A client took no bytes for write_timeout seconds.
  class WriteTimeout < ClientGone; end

  # Raised inside an app thread whose request ran past `soft_timeout`.
  #
  # An Exception, not a StandardError, as Ruby's Timeout does (it raises
  # Timeout::ExitException in the block's thread) and rack-timeout does
  # (RequestTimeoutException): the `rescue => e` around an API call or a
  # retry loop must not take it for one more error and carry on. `ensure`
  # blocks run, and code that rescues Exception to clean up and re-raise (a
  # database transaction's rollback) does its job. Code that rescues
  # Exception and does not re-raise (an error page middleware) swallows it:
  # the worker is retired all the same, since the thread was interrupted.
  class RequestTimeout < Exception # rubocop:disable Lint/InheritException
  end

  # `fork` in a worker with request threads: refused.
  class ForkError < RuntimeError; end
end
