from judgelab_cli import app

app()
