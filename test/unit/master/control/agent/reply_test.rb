# frozen_string_literal: true

require "test_helper"

# The agent's line, made of a Status#to_h: the words haproxy reads and the
# weight formula (idle threads of the serving workers less the listen
# queue, out of worker_processes x threads).
class ControlAgentReplyTest < Minitest::Test
  Reply = Narwhal::Master::Control::Agent::Reply

  # 2 workers of 4 threads, this master served, nothing queued.
  def status(workers, **changes)
    { "draining" => false, "handing_over" => false, "ever_ready" => true, "boot_failures" => 0,
      "worker_processes" => 2, "threads" => 4, "workers" => workers,
      "listeners" => [{ "queue" => 0 }, { "queue" => 0 }] }.merge(changes.transform_keys(&:to_s))
  end

  def worker(state, busy = 0, threads: 4)
    { "state" => state, "threads" => threads, "busy_threads" => busy }
  end

  def line(workers, **changes)
    Reply.line(status(workers, **changes))
  end

  def test_idle_workers_are_full_weight
    assert_equal "up ready 100%\n", line([worker("idle"), worker("idle")])
  end

  def test_the_weight_is_the_share_of_threads_free
    assert_equal "up ready 62%\n", line([worker("busy", 3), worker("idle")]), "5 of 8 free"
    assert_equal "up ready 12%\n", line([worker("busy", 4), worker("busy", 3)]), "1 of 8"
  end

  def test_connections_waiting_in_the_listen_queue_count_against_it
    queued = [{ "queue" => 2 }, { "queue" => 1 }]
    assert_equal "up ready 25%\n", line([worker("busy", 1), worker("busy", 2)], listeners: queued), "5 free - 3 waiting"
    unreadable = [{ "queue" => nil }]
    assert_equal "up ready 100%\n", line([worker("idle"), worker("idle")], listeners: unreadable)
  end

  # Busy but alive still gets a trickle: at 0% haproxy would drain it.
  def test_a_busy_server_keeps_the_least_weight
    assert_equal "up ready 1%\n", line([worker("busy", 4), worker("busy", 4)])
    assert_equal "up ready 1%\n", line([worker("busy", 4), worker("busy", 4)], listeners: [{ "queue" => 500 }])
  end

  # Capacity is what the master keeps (worker_processes x threads): a
  # worker booting (a crash's replacement) or quitting serves no one.
  def test_workers_not_serving_lower_the_weight
    assert_equal "up ready 50%\n", line([worker("idle"), worker("booting")])
    assert_equal "up ready 50%\n", line([worker("idle"), worker("quitting")])
    more = [worker("idle"), worker("idle"), worker("idle", threads: 8)] # a replacement serves beside its predecessor
    assert_equal "up ready 100%\n", line(more)
  end

  def test_the_master_draining_or_wanting_no_worker_drains
    serving = [worker("idle"), worker("idle")]
    assert_equal "drain\n", line(serving, draining: true), "graceful TERM, QUIT, TERM, INT"
    assert_equal "up ready 100%\n", line(serving, handing_over: true),
                 "the old master of a USR2 serves on while the new one boots"
    assert_equal "drain\n", line([worker("quitting")], worker_processes: 0), "WINCH, TTOU to 0"
    assert_equal "drain\n", line([], draining: true, ever_ready: false)
  end

  # HUP, recycling with no spare number, a crash: the workers on their
  # way will serve, as this master's did.
  def test_workers_being_replaced_drain
    assert_equal "drain\n", line([worker("quitting"), worker("quitting")])
    assert_equal "drain\n", line([worker("booting"), worker("quitting")])
    assert_equal "drain\n", line([worker("booting"), worker("booting")])
  end

  def test_nothing_that_can_serve_is_down_with_the_reason
    assert_equal "down #booting\n", line([worker("booting")], ever_ready: false), "the first workers"
    assert_equal "down #failing to boot\n", line([worker("booting")], boot_failures: 2)
    assert_equal "down #failing to boot\n", line([worker("quitting")], boot_failures: 1), "a HUP to a broken app"
    assert_equal "down #no worker\n", line([]), "all dead, forks held back"
  end

  # haproxy splits words on spaces, tabs and commas, reads a reason only
  # after a `#` that starts a word, and the line up to "\n".
  def test_every_answer_is_one_line_of_words_haproxy_reads
    answers = [line([worker("idle"), worker("busy", 1)]), line([], ever_ready: false), line([], draining: true)]
    answers.each do |answer|
      assert_match(/\A[a-z0-9% #]+\n\z/, answer)
      words = answer.chomp.split("#", 2).first.split
      assert words.all? { |w| %w[up down ready drain].include?(w) || w.match?(/\A\d{1,3}%\z/) }, answer
    end
  end
end
