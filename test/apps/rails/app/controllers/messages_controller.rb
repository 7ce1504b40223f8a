# A form with Rails' CSRF protection: GET renders the token into the form
# and the session cookie, POST without it is refused with 422.
class MessagesController < ApplicationController
  def new
  end

  def create
    body = params.require(:message).require(:body)
    render plain: "saved: #{body}\n"
  end
end
