Rails.application.routes.draw do
  get "up" => "rails/health#show", as: :rails_health_check

  root "messages#new"
  resources :messages, only: %i[new create]
  resources :uploads, only: :create
  post "echo" => "echo#create"
  # Action Cable is mounted at /cable (config.action_cable.mount_path)
end
