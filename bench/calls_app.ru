# frozen_string_literal: true

# examples/hello.ru wrapped in a method-call counter, for bench/calls.rb.
#
# CALLS_FROM, CALLS_TO: a TracePoint on :call (Ruby methods) and :c_call
#   (methods written in C) is enabled, in every thread, when request
#   CALLS_FROM reaches the app and disabled when request CALLS_TO does, so
#   the counts cover CALLS_TO - CALLS_FROM full request cycles through the
#   server (read, parse, app, respond, keep-alive).
# CALLS_OUT: the counts are written there as JSON, once complete.
#
# Calls made from this file (the counter's own, and the call of the app
# itself) are left out.

require "json"

from = Integer(ENV.fetch("CALLS_FROM"))
to = Integer(ENV.fetch("CALLS_TO"))
out = ENV.fetch("CALLS_OUT")

hello = Rack::Builder.parse_file(File.expand_path("../examples/hello.ru", __dir__))
hello = hello.first if hello.is_a?(Array) # Rack 2

# event => defined class => method name => calls. Nested so that counting
# a call allocates nothing once its method has been seen.
counts = { call: {}, c_call: {} }
here = __FILE__
trace = TracePoint.new(:call, :c_call) do |tp|
  next if tp.path == here

  (counts[tp.event][tp.defined_class] ||= Hash.new(0))[tp.method_id] += 1
end

# "Foo#bar" for an instance method, "Foo.bar" for a singleton method.
name = lambda do |klass, method|
  if klass.respond_to?(:singleton_class?) && klass.singleton_class?
    "#{klass.inspect[/\A#<Class:(.*)>\z/, 1] || klass.inspect}.#{method}"
  else
    "#{klass.inspect}##{method}"
  end
end

write = lambda do
  by_method = counts.flat_map do |event, classes|
    classes.flat_map { |klass, methods| methods.map { |m, n| [event.to_s, name.call(klass, m), n] } }
  end
  result = { "requests" => to - from, "ruby" => RUBY_DESCRIPTION,
             "yjit" => defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?, "methods" => by_method }
  File.write("#{out}.tmp", JSON.generate(result))
  File.rename("#{out}.tmp", out)
end

count = 0
counter = lambda do |env|
  count += 1
  if count == from
    trace.enable
  elsif count == to
    trace.disable
    write.call
  end
  hello.call(env)
end

run counter
