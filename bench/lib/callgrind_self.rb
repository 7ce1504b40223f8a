# frozen_string_literal: true

# Reads a callgrind output file and prints the instructions per request:
# in all, by shared object, and the functions that spent most themselves
# (self cost, callees not included). For bench/instructions.sh.
#
#   ruby bench/lib/callgrind_self.rb FILE REQUESTS [TOP]
class CallgrindSelf
  # callgrind compresses names: "(12) name" defines 12, "(12)" refers to it
  def initialize(path)
    @path = path
    @names = {}
    @objects = {}
    @by_function = Hash.new(0)
    @by_object = Hash.new(0)
  end

  def read
    object = function_object = function = nil
    call_cost_next = false
    File.foreach(@path) do |line|
      case line
      when /\Aob=(.*)/ then object = name(@objects, Regexp.last_match(1))
      when /\Afn=(.*)/
        function = name(@names, Regexp.last_match(1))
        function_object = object
      when /\Acob=(.*)/ then name(@objects, Regexp.last_match(1))
      when /\Acfn=(.*)/ then name(@names, Regexp.last_match(1))
      when /\Acalls=/ then call_cost_next = true # the next cost line is the call's, inclusive
      when /\A[0-9+\-*]\S*\s+(\d+)/
        if call_cost_next
          call_cost_next = false
        else
          cost = Regexp.last_match(1).to_i
          @by_function[[function_object, function]] += cost
          @by_object[function_object] += cost
        end
      end
    end
    self
  end

  def report(requests, top)
    total = @by_object.values.sum
    puts format("%<n>.0f instructions per request", n: total.to_f / requests)
    @by_object.max_by(8, &:last).each { |o, c| line(c, total, requests, o) }
    puts
    @by_function.max_by(top, &:last).each { |(o, f), c| line(c, total, requests, "#{f} [#{File.basename(o.to_s)}]") }
  end

  private

  def name(table, text)
    id, given = text.match(/\A\((\d+)\)(?: (.*))?\z/)&.captures
    return text unless id

    table[id] = given if given
    table.fetch(id, id)
  end

  def line(cost, total, requests, what)
    puts format("%<per>10.0f %<pct>5.1f%%  %<what>s", per: cost.to_f / requests, pct: 100.0 * cost / total, what: what)
  end
end

CallgrindSelf.new(ARGV.fetch(0)).read.report(Integer(ARGV.fetch(1)), Integer(ARGV.fetch(2, 25))) if $PROGRAM_NAME == __FILE__
