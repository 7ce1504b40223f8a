# frozen_string_literal: true

# examples/hello.ru wrapped in an allocation counter, for bench/allocations.rb.
# The wrapper itself allocates nothing per request (Integer counter), except
# at the few marked requests below.
#
# ALLOC_FROM, ALLOC_TO: GC.stat(:total_allocated_objects) is read when these
#   requests reach the app; the difference covers ALLOC_TO - ALLOC_FROM full
#   request cycles through the server (read, parse, app, respond, keep-alive).
# ALLOC_SAMPLE: then, with GC disabled, every allocation of the next
#   ALLOC_SAMPLE requests is traced (class, type, allocating file:line).
# ALLOC_OUT: the results are written there as JSON, once complete.

require "json"
require "objspace"

from = Integer(ENV.fetch("ALLOC_FROM"))
to = Integer(ENV.fetch("ALLOC_TO"))
sample = Integer(ENV.fetch("ALLOC_SAMPLE"))
out = ENV.fetch("ALLOC_OUT")

hello = Rack::Builder.parse_file(File.expand_path("../examples/hello.ru", __dir__))
hello = hello.first if hello.is_a?(Array) # Rack 2

count = 0
marks = {}
counts_before = nil

summarize = lambda do
  counts = ObjectSpace.count_objects
  by_type = counts.to_h { |k, v| [k.to_s, v - counts_before.fetch(k, 0)] }
  by_type.delete_if { |k, v| v <= 0 || %w[FREE TOTAL].include?(k) }
  by_class = Hash.new(0)
  by_site = Hash.new(0)
  class_of = Kernel.instance_method(:class)
  ObjectSpace.each_object do |obj|
    file = ObjectSpace.allocation_sourcefile(obj)
    next unless file

    klass = class_of.bind_call(obj)
    by_class[klass.to_s] += 1
    by_site["#{klass} #{file}:#{ObjectSpace.allocation_sourceline(obj)} " \
            "(#{ObjectSpace.allocation_class_path(obj)}##{ObjectSpace.allocation_method_id(obj)})"] += 1
  end
  { "by_type" => by_type, "by_class" => by_class, "by_site" => by_site }
end

counter = lambda do |env|
  count += 1
  case count
  when from
    marks[:from] = GC.stat(:total_allocated_objects)
  when to
    marks[:to] = GC.stat(:total_allocated_objects)
    GC.start
    GC.disable
    counts_before = ObjectSpace.count_objects
    ObjectSpace.trace_object_allocations_start
  when to + sample
    ObjectSpace.trace_object_allocations_stop
    traced = summarize.call
    GC.enable
    ObjectSpace.trace_object_allocations_clear
    result = {
      "requests" => to - from, "allocated" => marks[:to] - marks[:from],
      "sample_requests" => sample, "ruby" => RUBY_DESCRIPTION,
      "yjit" => defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?
    }.merge(traced)
    File.write("#{out}.tmp", JSON.generate(result))
    File.rename("#{out}.tmp", out)
  end
  hello.call(env)
end

run counter
