# frozen_string_literal: true

# Stands in for a worker's scoreboard counters (Scoreboard::WorkerSlot) in
# unit tests of the serving side: counts by counter index.
class FakeCounters
  attr_reader :counts

  def initialize
    @counts = Hash.new(0)
  end

  def count(counter)
    @counts[counter] += 1
  end
end
