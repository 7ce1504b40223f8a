# frozen_string_literal: true

require "test_helper"

# The per-worker bound on spooled response bytes, shared by threads.
class SpoolBudgetTest < Minitest::Test
  def test_bytes_are_taken_while_they_fit_and_given_back
    budget = Narwhal::SpoolBudget.new(100, 10)
    assert budget.reserve(60)
    assert budget.reserve(40)
    refute budget.reserve(1), "past the bound"
    assert_equal 100, budget.used
    budget.release(50)
    refute budget.reserve(51)
    assert budget.reserve(50)
    assert_equal 100, budget.used
  end

  def test_a_refused_reservation_takes_nothing
    budget = Narwhal::SpoolBudget.new(100, 10)
    assert budget.reserve(90)
    refute budget.reserve(20)
    assert_equal 90, budget.used
  end

  def test_a_budget_of_zero_refuses_everything
    refute Narwhal::SpoolBudget.new(0, 10).reserve(1)
  end

  def test_threads_share_it_without_losing_count_or_passing_the_bound
    budget = Narwhal::SpoolBudget.new(1000, 10)
    over = false
    threads = Array.new(8) do
      Thread.new do
        2000.times do
          next unless budget.reserve(100)

          over ||= budget.used > 1000
          budget.release(100)
        end
      end
    end
    threads.each(&:join)
    refute over, "never past the bound"
    assert_equal 0, budget.used
  end
end
