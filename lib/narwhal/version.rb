# frozen_string_literal: true

module Narwhal
  VERSION = "0.1.0"
end
